import type { Scope } from "./index.js";

/** Options of {@link strataMemory}. */
export interface StrataMemoryOptions {
  /** A client scope: `new Strata({...}).scope(userId, agentId)`. */
  scope: Scope;
  /** The session: a string, or computed from the call's parameters. */
  sessionId: string | ((params: any) => string);
  /** Put the Memory Context into the system message (default true). */
  inject?: boolean;
  /** Record the user turn and the reply (default true). */
  record?: boolean;
  /** End the session once the reply is recorded (default false). */
  endSession?: boolean;
  /** Told of a memory call that failed; the model call goes on (default console.warn). */
  onError?: (err: Error, stage: "inject" | "record" | "end") => void;
}

/**
 * A language-model middleware for the Vercel AI SDK (`ai` ≥ 6, specification v3):
 * `wrapLanguageModel({ model, middleware: strataMemory({ scope, sessionId }) })`.
 */
export declare function strataMemory(options: StrataMemoryOptions): {
  specificationVersion: "v3";
  transformParams(options: { type: "generate" | "stream"; params: any; model: any }): Promise<any>;
  wrapGenerate(options: { doGenerate: () => Promise<any>; doStream: () => Promise<any>; params: any; model: any }): Promise<any>;
  wrapStream(options: { doGenerate: () => Promise<any>; doStream: () => Promise<any>; params: any; model: any }): Promise<any>;
};
