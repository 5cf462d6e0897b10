//! The offline entity/relation extractor (no LLM): speaker names,
//! capitalised name spans and a small set of lexical patterns, read turn by
//! turn and sentence by sentence.
//!
//! - Entities: named speakers (person); runs of capitalised words that are
//!   not sentence-initial function words, months or weekdays (`entity`,
//!   typed more precisely when a pattern places them).
//! - Patterns (subject and object are names or a resolved pronoun):
//!   "X works at/for Y", "X got the offer from Y" (`works_at`), "X moved to Y" (`moved_to`, a synonym of
//!   `lives_in` by default), "X lives in Y" (`lives_in`), "X's sister Y" and
//!   "my sister Y" (`sister_of` from Y to X or the speaker; also brother,
//!   mother, father, wife, husband, partner, friend, colleague, manager,
//!   boss, son, daughter, cousin, roommate, mentor), "X mentors/manages/
//!   married/visited/joined/founded/leads Y".
//! - Pronouns "he", "she", "they" as a subject resolve to the entity the
//!   session named last — never to the speaker by default.
//! - `mentioned_with` links names that share a sentence but no other relation;
//!   a named speaker `mentions` every other name they say; "I" as a subject
//!   (or "we", "our": the speaker is one of them) is the speaker when the
//!   speaker has a name ("I work at Acme"); the semantic worker names an
//!   unnamed user's turns after the scope's user
//!   (`worker::semantic::user_turns_named`).

use regex::Regex;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

use crate::graph::{lexicon, EntityMention, Extraction, RelationMention, UNKNOWN_TYPE};
use crate::model::TranscriptTurn;
use crate::text::split_sentences;

/// Longest name, in words: a longer run of capitalised words is a heading or shouting, not a name.
pub const MAX_NAME_WORDS: usize = 6;

/// Most names per sentence that get `mentioned_with` edges (pairs grow quadratically).
pub const MAX_COOCCURRING_NAMES: usize = 5;

const STOP: &[&str] = &[
    "i",
    "i'm",
    "i've",
    "i'll",
    "i'd",
    "a",
    "an",
    "the",
    "my",
    "your",
    "our",
    "their",
    "his",
    "her",
    "its",
    "he",
    "she",
    "they",
    "we",
    "you",
    "it",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "what",
    "when",
    "where",
    "who",
    "why",
    "how",
    "which",
    "and",
    "but",
    "or",
    "so",
    "if",
    "then",
    "also",
    "just",
    "yes",
    "no",
    "not",
    "ok",
    "okay",
    "oh",
    "hi",
    "hey",
    "hello",
    "thanks",
    "thank",
    "wow",
    "well",
    "sure",
    "great",
    "cool",
    "nice",
    "sorry",
    "please",
    "yeah",
    "yep",
    "haha",
    "lol",
    "today",
    "tomorrow",
    "yesterday",
    "tonight",
    "last",
    "next",
    "every",
    "some",
    "any",
    "all",
    "both",
    "maybe",
    "actually",
    "really",
    "anyway",
    "btw",
    "in",
    "on",
    "at",
    "for",
    "with",
    "to",
    "from",
    "by",
    "of",
    "as",
    "after",
    "before",
    "since",
    "during",
    "about",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "do",
    "does",
    "did",
    "have",
    "has",
    "had",
    "can",
    "could",
    "will",
    "would",
    "should",
    "may",
    "might",
    "must",
    "let",
    "let's",
    "good",
    "big",
    "first",
    "one",
    "two",
    "three",
    "mr",
    "mrs",
    "ms",
    "dr",
    "speaker",
    "user",
    "assistant",
    "congratulations",
    "congrats",
    "awesome",
    "absolutely",
    "definitely",
    "totally",
    "exactly",
    "right",
    "love",
    // interjections and sentence openers that arrive capitalised next to names
    "woohoo",
    "woo",
    "yay",
    "omg",
    "aww",
    "aw",
    "ah",
    "ahh",
    "hmm",
    "um",
    "uh",
    "wish",
    "knowing",
    "thinking",
    "hope",
    "guess",
    "plus",
    "btw",
    "ugh",
    "whoa",
    "gosh",
    "dear",
    "happy",
    "glad",
    "wow",
    "bye",
    "see",
    "good",
    "night",
    "morning",
];
/// Month and weekday names, their abbreviations and their other forms
/// (cases, plurals) of every language ([`crate::text::lexicon`]), which are
/// no names, except "may" and "mai": May is a given name too (and its month
/// reads as a date by the digits beside it), Mai a Vietnamese given name and
/// the end of "Chiang Mai".
fn months_days() -> &'static std::collections::HashSet<&'static str> {
    static M: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    M.get_or_init(|| {
        let mut m = crate::text::lexicon::union(|l| &l.months);
        m.extend(crate::text::lexicon::union(|l| &l.weekdays));
        m.extend(crate::text::lexicon::union(|l| &l.calendar_forms));
        for l in crate::text::lexicon::all() {
            m.extend(l.month_abbreviations.keys().map(String::as_str));
            m.extend(l.weekday_abbreviations.keys().map(String::as_str));
        }
        m.remove("may");
        m.remove("mai");
        m
    })
}
const KIN: &str = "sister|brother|mother|mom|mum|father|dad|wife|husband|partner|friend|best friend|colleague|coworker|co-worker|manager|boss|son|daughter|cousin|roommate|mentor|neighbor|neighbour|girlfriend|boyfriend|fiancée|fiancee|fiancé|fiance|aunt|uncle|grandmother|grandma|grandfather|grandpa";
const PRONOUNS: &[&str] = &["he", "she", "they"];
const VERBS: &str = "moving to|moving from \\p{Lu}[\\w'’\\-]*(?: \\p{Lu}[\\w'’\\-]*)* to|moved from \\p{Lu}[\\w'’\\-]*(?: \\p{Lu}[\\w'’\\-]*)* to|work at|work for|live in|am living in|am moving to|works at|works for|worked at|worked for|is working at|started at|joined|moved to|is moving to|relocated to|lives in|lived in|is living in|mentors|mentored|manages|managed|married|visited|founded|leads|led|studies at|studied at|teaches at|owns|adopted|got an offer from|got the offer from|got a job offer from|got the job at|got a job at|accepted the offer from|accepted an offer from";

/// A liked object: a quoted title (`q`), a name (`n`) or a lowercase phrase (`l`).
const LIKED: &str = r"[\x22“‘](?P<q>[^\x22”’]{2,60})[\x22”’]|(?P<n>\p{Lu}[\w'’\-]*(?::\p{Lu}[\w'’\-]*)?(?:\s+(?:of\s+(?:the\s+)?)?\p{Lu}[\w'’\-]*)*(?:\s+\d{1,4}\b)?)|(?P<l>[a-z][a-z\-]+(?:\s+[a-z][a-z\-+]+){0,5})";

/// A character inside a capitalised name word: a letter, digit, hyphen or
/// apostrophe, but not of a script written without spaces or without
/// capitals, which a Latin, Greek or Cyrillic name runs into only when the
/// two are glued ("Starlit的终面过了" is the name "Starlit" and a Chinese
/// clause, "Starlit에서" the name and a Korean particle).
const NAME_CHAR: &str = r"[[\w'’\-]&&[^\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Hangul}\p{Arabic}\p{Hebrew}\p{Devanagari}]]";

pub(super) fn name_re() -> &'static str {
    // a name: capitalised words (letters, digits, hyphens, apostrophes inside), joined by spaces
    static R: OnceLock<String> = OnceLock::new();
    R.get_or_init(|| format!(r"(?:\p{{Lu}}{w}*(?:\s+(?:(?:of|de|van|von|the|da|di|le|la)\s+(?:the\s+)?)?\p{{Lu}}{w}*)*)", w = NAME_CHAR))
}

struct Patterns {
    span: Regex,
    verb: Regex,
    possessive_kin: Regex,
    my_kin: Regex,
    /// "my dog Max", "a cat named Luna", "a grey cat called Miso": up to two
    /// lowercase words (any adjectives) before the animal (owner: `own`).
    pet: Regex,
    /// "I'm a nurse", "I work as a software engineer".
    role: Regex,
    /// "I play the violin".
    plays: Regex,
    /// "the book Becoming Nicole", "read The Hobbit", "playing Fortnite".
    work: Regex,
    /// "went to Japan", "trip to Tokyo".
    visit: Regex,
    /// "member of X", "joined the X".
    member: Regex,
    /// "I wrote a song called Brave".
    created: Regex,
    /// Korean (님, 씨), Japanese (さん, くん, ちゃん, 様, 先生) and Vietnamese (anh, chị, ...) honorifics.
    honorific: Regex,
    /// "I love camping", "I'm a big fan of pottery", "I'm into classic rock", "my love of
    /// reading", "I loved \"Becoming Nicole\"" (the object: a quoted title, a name or a
    /// lowercase phrase).
    likes_any: Regex,
    /// "Ratatouille is one of my favorites", "my favorite game is CS:GO", "as a Manchester City fan".
    favorite: Regex,
    /// "I'm doing kickboxing", "started aerial yoga", "playing my violin".
    sport: Regex,
    /// "We played Fortnite", "I'm playing \"The Witcher 3\"" (a named game).
    plays_named: Regex,
    /// "I went to an LGBTQ support group", "signed up for a pottery class" (and "... in Boston").
    attended: Regex,
    /// "I joined a chess club", "joined a nearby church".
    joined_group: Regex,
    /// "I painted that lake sunrise", "making my first mobile game", "my horse painting I did".
    made: Regex,
    /// "\"Becoming Nicole\" by Amy Ellis Nutt", "a song by Tupac and Dr. Dre called \"California Love\"".
    by_author: Regex,
    /// "Ed Sheeran's \"Perfect\"".
    authors_title: Regex,
    /// "Oscar, my guinea pig".
    name_my_pet: Regex,
    /// "Her name's Coco" (a pet named in a turn about a pet).
    pet_name_is: Regex,
    /// "I'm planning a trip to the East Coast", "can't wait to visit Tokyo".
    plans_visit: Regex,
    /// "thanks for being an awesome friend", "glad to have you as a friend" (said to the other speaker).
    friend_you: Regex,
    /// "my friends Josh and Mark".
    my_friends: Regex,
    /// "hustling as a musician" (first person in the sentence).
    as_role: Regex,
}

/// True when `first`, the word opening a sentence before the capitalised
/// words `rest`, is a greeting of any language ([`crate::text::lexicon`]),
/// or an acknowledgement ("Gracias", "Thanks") before a single common given
/// name (acknowledgements include adjectives: "Great Barrier Reef" keeps
/// its first word).
fn opening_interjection(first: &str, rest: &str) -> bool {
    static GREET: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    static ACK: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    let greet = GREET.get_or_init(|| crate::text::lexicon::union(|l| &l.greetings));
    let ack = ACK.get_or_init(|| crate::text::lexicon::union(|l| &l.acknowledgements));
    let w = first.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    greet.contains(w.as_str())
        || (ack.contains(w.as_str()) && !rest.contains(' ') && lexicon::contains(lexicon::GIVEN_NAMES, &rest.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase()))
}

/// The liked objects of a match in `sentence`: a quoted title, a name, or
/// short lowercase phrases. A phrase ends at the first function word and
/// keeps at most three words; a list goes on through commas, "and" and "or"
/// while each item is a phrase of its own ("hiking, swimming and cycling",
/// "hiking, swimming, and cycling": three). When the last item is a phrase whose last word is a plural head
/// and every other is one bare word ("action, sci-fi and horror movies"),
/// the head belongs to each ("action movies", "sci-fi movies", "horror
/// movies").
fn liked_objects(c: &regex::Captures, sentence: &str) -> Vec<(String, &'static str)> {
    static TAIL: OnceLock<Regex> = OnceLock::new();
    if let Some(q) = c.name("q") {
        return clean_title(q.as_str()).map(|t| (t, "work")).into_iter().collect();
    }
    if let Some(n) = c.name("n") {
        return clean_name(n.as_str()).map(|n| (n, UNKNOWN_TYPE)).into_iter().collect();
    }
    let Some(l) = c.name("l") else { return Vec::new() };
    // the list the phrase may open: its items after commas
    let tail = TAIL.get_or_init(|| Regex::new(r"^(?:\s*,\s*(?:and\s+|or\s+)?[a-z][a-z\-]+(?:\s+[a-z][a-z\-+]+){0,3})+").expect("list regex"));
    let listed = sentence.get(l.end()..).and_then(|rest| tail.find(rest));
    let text = match listed {
        Some(m) => format!("{}{}", l.as_str(), m.as_str()),
        None => l.as_str().to_string(),
    };
    let mut items: Vec<String> = Vec::new();
    // the serial comma leaves an empty part before its "and" ("swimming, and cycling")
    let parts = text.split(',').flat_map(|p| p.split(" and ")).flat_map(|p| p.split(" or "));
    for part in parts.filter(|p| !p.trim().is_empty()) {
        let part = part.trim().trim_start_matches("and ").trim_start_matches("or ").trim();
        let Some(v) = value_phrase(part, 3) else { break };
        let whole = v.split(' ').count() == part.split_whitespace().count();
        items.push(v);
        // something other than a list separator ended the phrase: the list ends with it
        if !whole || items.len() == 5 {
            break;
        }
    }
    if items.len() >= 2 {
        let last = items.last().cloned().unwrap_or_default();
        let head = last.rsplit(' ').next().unwrap_or("").to_string();
        let bare = |v: &String| !v.contains(' ') && !v.ends_with("ing") && !v.ends_with('s');
        if last.contains(' ') && head.ends_with('s') && items[..items.len() - 1].iter().all(bare) {
            let n = items.len() - 1;
            for v in &mut items[..n] {
                *v = format!("{v} {head}");
            }
        } else if listed.is_none() {
            // "X and Y" without a comma joins too much else ("my love of gaming and connect
            // with others") to take Y for a second liked thing
            items.truncate(1);
        }
    }
    items.into_iter().map(|v| (v, "activity")).collect()
}

/// Particles that make an "-ing" word before them a phrasal verb ("curling
/// up", "hanging out"): a way of doing something, not a liked thing.
const PARTICLES: &[&str] = &["up", "out", "down", "off", "away", "back", "over", "around"];

/// Words that end a value phrase ("camping trips with my fam" → "camping trips").
const PHRASE_END: &[&str] = &[
    "and", "or", "but", "with", "when", "because", "to", "in", "on", "at", "for", "of", "so", "as", "that",
    "which", "who", "is", "are", "was", "were", "too", "more", "than", "since", "after", "before", "while",
    "these", "those", "this", "it", "them", "a", "an", "the", "my", "your", "his", "her", "our", "their",
    "all", "every", "really", "very", "much", "lot", "lots", "now", "then", "here", "there", "from", "about",
    "like", "just", "also", "ever", "and", "these", "days", "lately", "recently", "together", "again",
    "yesterday", "today", "last", "next", "i", "you", "we", "they", "he", "she", "by", "into", "around",
    "has", "have", "had", "been", "be", "will", "would", "can", "could", "do", "did", "does", "not", "always",
    "even", "still", "already", "anymore",
];
/// True for a word that ends a value phrase ([`PHRASE_END`]: articles,
/// prepositions, pronouns, auxiliaries): a function word, not a noun.
pub(super) fn is_function_word(w: &str) -> bool {
    PHRASE_END.contains(&w)
}

/// First words that make a phrase no value ("I love that", "I love how ...", "I love being ...").
const PHRASE_REJECT: &[&str] = &[
    "it", "that", "this", "you", "how", "what", "when", "where", "why", "to", "the", "a", "an", "my", "your",
    "our", "his", "her", "their", "them", "him", "being", "having", "getting", "seeing", "hearing", "doing",
    "going", "making", "knowing", "thinking", "feeling", "talking", "chatting", "sharing", "spending",
    "thing", "things", "stuff", "idea", "ideas", "one", "ones", "all", "so", "such", "every", "each", "some",
    "any", "those", "these", "there", "here", "people", "everyone", "everything", "something", "anything",
    "nothing", "seeing", "hanging", "learning", "trying", "working", "taking", "looking", "spending",
    "helping", "watching", "supporting", "connecting", "expressing", "sending", "telling", "finding",
    "having", "catching", "both", "when", "if", "me", "us", "myself", "yourself", "lots", "time", "moments",
    "different", "other", "various", "many", "several", "new", "great", "good", "cool", "awesome", "nice",
    "same", "games", "playing", "entering", "capturing", "transforming",
];

/// The head of a lowercase phrase, up to `max` words, cut at [`PHRASE_END`];
/// `None` when it opens with a [`PHRASE_REJECT`] word or is shorter than 3 letters.
fn value_phrase(text: &str, max: usize) -> Option<String> {
    let mut words = Vec::new();
    let mut ended_by = "";
    for w in text.split_whitespace() {
        let w = w.trim_matches(|c: char| c.is_ascii_punctuation() && c != '-' && c != '+');
        if w.is_empty() || PHRASE_END.contains(&w) || words.len() == max {
            ended_by = w;
            break;
        }
        words.push(w);
    }
    let first = *words.first()?;
    if PHRASE_REJECT.contains(&first) || words.concat().chars().count() < 3 {
        return None;
    }
    // "I love making it", "I love taking pics of the": a verb form whose object follows is no value
    if words.len() == 1 && first.ends_with("ing") && OBJECT_STARTS.contains(&ended_by) {
        return None;
    }
    // "curling up (on the couch)", "fixing up things": a phrasal verb
    if first.ends_with("ing") && words.get(1).is_some_and(|w| PARTICLES.contains(w)) {
        return None;
    }
    Some(words.join(" "))
}

/// Words that open a verb's object: a lone "-ing" word before one is a verb, not a hobby.
const OBJECT_STARTS: &[&str] = &[
    "the", "a", "an", "my", "your", "his", "her", "our", "their", "it", "them", "this", "that", "these",
    "those", "me", "you", "him", "us", "all", "every", "up", "out",
];

/// A quoted title, trimmed; `None` when it is no title (too long, a sentence,
/// lowercase).
fn clean_title(raw: &str) -> Option<String> {
    let t = raw.trim().trim_matches(|c: char| c.is_ascii_punctuation() && c != '!' && c != '?');
    let words = t.split_whitespace().count();
    (words > 0 && words <= MAX_NAME_WORDS && t.chars().next().is_some_and(char::is_uppercase)).then(|| t.to_string())
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let name = name_re();
        let subj = format!(r"(?P<s>\bI['’]m\b|\bI am\b|{name}|\b(?:[Hh]e|[Ss]he|[Tt]hey|I|[Ww]e)\b)");
        Patterns {
            // capitalised words, joined by "of (the)", "de", ...; a title's number ("FIFA 23") and
            // an inner colon ("CS:GO") belong to it
            span: Regex::new(&format!(r"\p{{Lu}}{w}*(?::\p{{Lu}}{w}*)?(?:\s+(?:(?:of|de|van|von|da|di|del|du|der|den)\s+(?:(?:the|der|den|de|la)\s+)?)?\p{{Lu}}{w}*(?::\p{{Lu}}{w}*)?)*(?:\s+\d{{1,4}}\b)?", w = NAME_CHAR)).expect("span regex"),
            verb: Regex::new(&format!(
                r"{subj}\s+(?:(?:also|now|recently|just|finally|still)\s+)?(?P<v>{VERBS})\s+(?:the\s+)?(?P<o>{name})(?:(?:\s+(?:[a-z]+|\d+)){{0,3}}?,?\s+and\s+(?:(?:also|now)\s+)?(?P<v2>{VERBS})\s+(?:the\s+)?(?P<o2>{name}))?"
            ))
            .expect("verb regex"),
            possessive_kin: Regex::new(&format!(r"(?P<x>{name})(?:'s|’s)\s+(?:(?:older|younger|little|big|best|new)\s+)?(?P<k>{KIN}),?\s+(?P<y>{name})"))
                .expect("kin regex"),
            my_kin: Regex::new(&format!(r"\b(?:[Mm]y|[Oo]ur)\s+(?:(?:older|younger|little|big|best|new)\s+)?(?P<k>{KIN}),?\s+(?P<y>{name})"))
                .expect("my-kin regex"),
            pet: Regex::new(&format!(
                r"\b(?P<own>[Mm]y|[Oo]ur|[Aa]|[Aa]nother|[Tt]he|[Hh]is|[Hh]er|[Tt]heir)\s+(?:[a-z]+(?:-[a-z]+)*\s+){{0,2}}(?:{pets})(?:\s+(?:named|called))?,?\s+(?P<y>{name})",
                pets = lexicon::PETS
            ))
            .expect("pet regex"),
            role: Regex::new(&format!(
                r"\b(?:I['’]m|I am|I work as|I worked as|I['’]ve been|I was)\s+(?:a|an)\s+(?P<r>(?:[a-z]+\s+)?(?:{roles}))\b",
                roles = lexicon::ROLES.join("|")
            ))
            .expect("role regex"),
            plays: Regex::new(&format!(
                r"\bI\s+(?:also\s+|still\s+|used to\s+)?(?:play|played|am playing|['’]m playing)\s+(?:the\s+)?(?P<a>{})\b",
                lexicon::PLAYABLE.join("|")
            ))
            .expect("plays regex"),
            work: Regex::new(&format!(
                r"\b(?:(?:the|a|my|favorite|favourite|new)\s+(?:{cues})(?:\s+(?:called|named|titled))?|(?:read|reading|watched|watching|playing|played|listened to|listening to)(?:\s+the\s+(?:{cues}))?)\s+[\x22“]?(?P<y>{name})",
                cues = lexicon::WORK_CUES
            ))
            .expect("work regex"),
            visit: Regex::new(&format!(
                r"\b(?P<v>went|been|go|going|traveled|travelled|trip|flew|drove|headed|vacation|holiday|visit|visiting)\s+(?:back\s+)?(?:to\s+)(?:the\s+)?(?P<y>{name})"
            ))
            .expect("visit regex"),
            member: Regex::new(&format!(r"\b(?:member of|joined|part of)\s+(?:the\s+)?(?P<y>{name})")).expect("member regex"),
            created: Regex::new(&format!(
                r"\bI\s+(?:just\s+|finally\s+)?(?:wrote|painted|made|drew|composed|created|recorded|released|published)\s+(?:a|an|the|my)\s+(?:[a-z]+\s+){{0,2}}(?:called|named|titled)\s+[\x22“]?(?P<y>{name})"
            ))
            .expect("created regex"),
            likes_any: Regex::new(&format!(
                r"\b(?:I(?:['’]m| am)?\s+(?:really\s+|just\s+|absolutely\s+|also\s+|totally\s+|still\s+|always\s+)?(?:love|like|enjoy|adore|loved|enjoyed|liked)|(?:I['’]m|I am)\s+(?:a\s+|such\s+a\s+)?(?:big\s+|huge\s+|massive\s+)?fan\s+of|(?:I['’]m|I am|I['’]ve been|I have been|I['’]ve become|I became)\s+(?:really\s+|totally\s+|so\s+|getting\s+|now\s+)?(?:into|obsessed with|hooked on|interested in|passionate about)|[Mm]y\s+(?:love|passion)\s+(?:of|for))\s+(?:both\s+)?(?:{obj})",
                obj = LIKED
            ))
            .expect("likes-any regex"),
            favorite: Regex::new(&format!(
                r"(?:(?P<s>[\x22“][^\x22”]{{2,60}}[\x22”]|{name})\s+(?:is|are)\s+(?:one of\s+|two of\s+)?my\s+(?:all-time\s+)?(?:favou?rites?|faves?)\b|\b[Mm]y\s+favou?rite\s+(?:[a-z]+\s+)?(?:is|was)\s+(?:{obj})|\b[Aa]s\s+an?\s+(?P<fan>{name})\s+fan\b)",
                obj = LIKED
            ))
            .expect("favorite regex"),
            sport: Regex::new(&format!(
                r"\b(?:doing|do|started|start|trying|tried|practicing|practising|playing|play|played|taking|took|into)\s+(?:some\s+|a\s+little\s+|my\s+|the\s+|a\s+)?(?P<a>(?:[a-z]+\s+)?(?:{sports}|{playable}))\b",
                sports = lexicon::SPORTS.join("|"),
                playable = lexicon::PLAYABLE.join("|")
            ))
            .expect("sport regex"),
            plays_named: Regex::new(&format!(
                r"\b(?:play|played|playing|['’]m playing|hooked on)\s+(?:the\s+game\s+|this\s+(?:great\s+)?game\s+called\s+|a\s+game\s+called\s+)?(?:[\x22“](?P<q>[^\x22”]{{2,60}})[\x22”]|(?P<n>{name}))"
            ))
            .expect("plays-named regex"),
            attended: Regex::new(&format!(
                r"\b(?:went|go|going|got to go|been)\s+to\s+(?:an?|the|my|this|that)\s+(?P<e>(?:[\w+'’\-]+\s+){{0,4}}?(?:{events}))\b(?:\s+(?:in|at)\s+(?P<y>{name}))?|\b(?:attended|signed up for|registered for|took|taking)\s+(?:an?|the|my|this|that)\s+(?P<e2>(?:[\w+'’\-]+\s+){{0,4}}?(?:{events}))\b",
                events = lexicon::EVENT_NOUNS
            ))
            .expect("attended regex"),
            joined_group: Regex::new(&format!(
                r"\bjoined\s+(?:an?|the|my|this|our)\s+(?P<g>(?:[\w+'’\-]+\s+){{0,3}}?(?:{groups})(?:\s+for\s+[\w+'’\-]+(?:\s+[\w+'’\-]+)?)?)\b",
                groups = lexicon::GROUP_NOUNS
            ))
            .expect("joined regex"),
            made: Regex::new(&format!(
                r"\b(?:I|we)\s+(?:just\s+|recently\s+|finally\s+|also\s+)?(?:painted|drew|wrote|composed|built|made|created|started|launched|published|released|designed|knitted|baked|finished|making|writing|painting|building)\s+(?:a|an|my|this|that|the|our)\s+(?:first\s+|new\s+|own\s+|little\s+)?(?P<y>(?:[\w'’\-]+\s+){{0,2}}?(?:{made}))\b|\b[Mm]y\s+(?P<y2>(?:[\w'’\-]+\s+){{0,2}}?(?:{made}))\s+(?:that\s+)?I\s+(?:did|made|painted|wrote|drew)\b",
                made = lexicon::MADE_NOUNS
            ))
            .expect("made regex"),
            by_author: Regex::new(&format!(
                r"(?:[\x22“](?P<t>[^\x22”]{{2,60}})[\x22”]|(?:song|book|novel|album|movie|film|poem|painting)s?)\s+by\s+(?P<a>{name})(?:\s+and\s+(?P<b>{name}))?(?:,?\s+(?:called|named|titled)\s+[\x22“](?P<t2>[^\x22”]{{2,60}})[\x22”])?"
            ))
            .expect("by-author regex"),
            authors_title: Regex::new(&format!(r"(?P<a>{name})['’]s\s+[\x22“](?P<t>[^\x22”]{{2,60}})[\x22”]")).expect("author's-title regex"),
            name_my_pet: Regex::new(&format!(
                r"(?P<y>{name}),\s+(?:my|our)\s+(?:(?:new|little|sweet|old|baby|furry)\s+)?(?:{pets})\b",
                pets = lexicon::PETS
            ))
            .expect("name-my-pet regex"),
            pet_name_is: Regex::new(&format!(r"\b(?:[Hh]is|[Hh]er|[Ii]ts|[Tt]heir)\s+name(?:['’]s|\s+is)\s+(?P<y>{name})")).expect("pet-name regex"),
            plans_visit: Regex::new(&format!(
                r"\b(?:planning\s+(?:a|my|our)\s+(?:\w+\s+)?(?:trip|visit|vacation)\s+to|plan(?:ning)?\s+to\s+(?:visit|go\s+to)|(?:[Cc]an['’]t wait|want|wanna|hope|hoping|keen|would love|['’]d love|dream)\s+to\s+(?:go\s+(?:back\s+)?to|visit|explore)|(?:going|heading|off)\s+to\s+(?:the\s+)?(?P<y2>{name})\s+(?:next|soon|this\s+(?:summer|fall|autumn|winter|spring|weekend|month|year)|in\s+a\s+few|after)|(?:gonna|going to)\s+be\s+in)\s+(?:the\s+)?(?P<y>{name})?"
            ))
            .expect("plans-visit regex"),
            friend_you: Regex::new(r"\b(?:(?:being|be|as|are|you['’]re|you are|have you as)\s+(?:an?|my|such\s+an?|the)\s+(?:\w+\s+)?friend|(?:great|good|nice|lucky)\s+to\s+have\s+(?:a\s+)?(?:friend|you\s+as\s+a\s+friend)|(?:you['’]re|you are)\s+(?:a\s+)?(?:true|real|good|great|best)\s+friend)\b").expect("friend-you regex"),
            my_friends: Regex::new(&format!(r"\b[Mm]y\s+(?:\w+\s+)?friends,?\s+(?P<a>{name})(?:,?\s+and\s+(?P<b>{name}))?")).expect("my-friends regex"),
            as_role: Regex::new(&format!(
                r"\bas\s+an?\s+(?P<r>(?:[a-z]+\s+)?(?:{roles}))\b",
                roles = lexicon::ROLES.join("|")
            ))
            .expect("as-role regex"),
            honorific: Regex::new(
                r"(?P<ko>[가-힣]{2,4})\s?(?:님|씨)|(?P<ja>[\p{Han}\p{Katakana}ー]{1,6})(?:さん|くん|ちゃん|様|先生)|\b(?:anh|chị|em|ông|bà|cô|chú|bác)\s+(?P<vi>\p{Lu}\p{L}*)",
            )
            .expect("honorific regex"),
        }
    })
}

fn predicate_of(verb: &str) -> (&'static str, &'static str) {
    // (predicate, object type)
    match verb {
        "works at" | "works for" | "worked at" | "worked for" | "is working at" | "started at"
        | "work at" | "work for" => ("works_at", "organization"),
        // an offer taken or announced: the employer from then on
        v if v.contains("offer from") || v.starts_with("got the job at") || v.starts_with("got a job at") => {
            ("works_at", "organization")
        }
        "joined" => ("member_of", "organization"),
        v if v.starts_with("moving from ") || v.starts_with("moved from ") || v == "moving to" => {
            ("moved_to", "place")
        }
        "moved to" | "is moving to" | "relocated to" | "am moving to" => ("moved_to", "place"),
        "lives in" | "lived in" | "is living in" | "live in" | "am living in" => {
            ("lives_in", "place")
        }
        "mentors" | "mentored" => ("mentors", "person"),
        "manages" | "managed" => ("manages", UNKNOWN_TYPE),
        "married" => ("married_to", "person"),
        "visited" => ("visited", "place"),
        "founded" => ("founded", "organization"),
        "leads" | "led" => ("leads", UNKNOWN_TYPE),
        "studies at" | "studied at" => ("studies_at", "organization"),
        "teaches at" => ("teaches_at", "organization"),
        "owns" => ("owns", UNKNOWN_TYPE),
        "adopted" => ("adopted", "animal"),
        _ => ("related_to", UNKNOWN_TYPE),
    }
}

fn kin_predicate(k: &str) -> String {
    let k = match k {
        "mom" | "mum" => "mother",
        "dad" => "father",
        "best friend" => "friend",
        "coworker" | "co-worker" => "colleague",
        "boss" => "manager",
        "neighbour" => "neighbor",
        "grandma" => "grandmother",
        "grandpa" => "grandfather",
        "fiancée" | "fiancee" | "fiancé" => "fiance",
        other => other,
    };
    format!("{}_of", k.replace(' ', "_"))
}

/// Strips a possessive and surrounding punctuation; `None` when what is left
/// is a function word, a month or weekday, or too short to be a name.
fn clean_name(raw: &str) -> Option<String> {
    let t = raw
        .trim()
        .trim_end_matches("'s")
        .trim_end_matches("’s")
        .trim_matches(|c: char| c.is_ascii_punctuation());
    let words: Vec<&str> = t.split_whitespace().collect();
    // drop leading function words ("The", "My") of a span
    let mut start = 0;
    while start < words.len() && {
        let w = words[start].to_lowercase().replace('’', "'");
        let w = w.trim_matches(|c: char| c.is_ascii_punctuation() && c != '\'');
        STOP.contains(&w)
            || lexicon::contains(lexicon::OPENERS, w)
            // "Lovin' Aerosmith", "Exploring Japan": a leading verb form, not part of a name
    } {
        start += 1;
    }
    let mut end = words.len();
    while end > start
        && STOP.contains(
            &words[end - 1]
                .to_lowercase()
                .trim_matches(|c: char| c.is_ascii_punctuation()),
        )
    {
        end -= 1;
    }
    let words = &words[start..end];
    if words.is_empty() || words.len() > MAX_NAME_WORDS || t.len() > 4 * MAX_NAME_WORDS * 12 {
        return None;
    }
    let joined = words.join(" ");
    let lower = joined.to_lowercase();
    if words.len() == 1
        && (STOP.contains(&lower.as_str())
            || months_days().contains(lower.as_str())
            || lower.chars().count() < 2)
    {
        return None;
    }
    if months_days().contains(lower.as_str()) {
        return None;
    }
    // "Το Σάββατο", "Τον Αύγουστο", "Next Saturday": an article or a word
    // before a calendar name is no name either
    if words.len() == 2 && months_days().contains(words[1].to_lowercase().as_str()) {
        return None;
    }
    // a number, or a date ("July 20"), is no name
    if !joined.chars().any(char::is_alphabetic) || months_days().contains(words[0].to_lowercase().as_str()) {
        return None;
    }
    // an acronym alone ("VR", "PC", "RPGs") is a common noun more often than a name
    if words.len() == 1 {
        let letters: Vec<char> = joined.trim_end_matches('s').chars().collect();
        if (2..=5).contains(&letters.len()) && letters.iter().all(|c| c.is_ascii_uppercase()) && type_cue(&joined).is_none() {
            return None;
        }
    }
    let lw: Vec<String> = words
        .iter()
        .map(|w| w.to_lowercase().trim_end_matches("'s").trim_end_matches("’s").trim_matches(|c: char| c.is_ascii_punctuation()).to_string())
        .collect();
    // "LGBTQ", "Pride Month", "New Year": identities, holidays and the like name no entity
    if lw.iter().all(|w| lexicon::contains(lexicon::IDENTITIES, w) || months_days().contains(w.as_str())) {
        return None;
    }
    // "Financial Analyst": a role (a works_as value), not an entity
    if lw.last().is_some_and(|w| lexicon::contains(lexicon::ROLES, w)) && !lexicon::contains(lexicon::HONORIFICS, &lw[0]) {
        return None;
    }
    Some(joined)
}

/// The type a name's own words give it: a gazetteer organization, product
/// or place ([`lexicon::ORGANIZATIONS`], [`lexicon::PRODUCTS`],
/// [`lexicon::PLACES`]), a place,
/// organization or event suffix ("Grand Canyon", "Acme Inc", "Pride
/// Parade"), an honorific ("Dr. Lee"); `None` when they say nothing.
pub fn type_cue(name: &str) -> Option<&'static str> {
    let key = crate::graph::identity_key(name);
    // a whole name in a gazetteer is the strongest cue ("Manchester City" the club, not a city)
    if lexicon::contains(lexicon::ORGANIZATIONS, &key) {
        return Some("organization");
    }
    if lexicon::contains(lexicon::PRODUCTS, &key) {
        return Some("product");
    }
    if lexicon::contains(lexicon::PLACES, &key) {
        return Some("place");
    }
    let words: Vec<&str> = key.split_whitespace().collect();
    let first = words.first()?.trim_end_matches('.');
    if words.len() > 1 && lexicon::contains(lexicon::HONORIFICS, first) {
        return Some("person");
    }
    let last = words.last()?.trim_matches(|c: char| c.is_ascii_punctuation());
    if lexicon::contains(lexicon::ORG_SUFFIXES, last) {
        Some("organization")
    } else if words.len() == 1 {
        None
    } else if lexicon::contains(lexicon::EVENT_SUFFIXES, last) {
        Some("event")
    } else if lexicon::contains(lexicon::PLACE_SUFFIXES, last) || lexicon::contains(lexicon::PLACE_SUFFIXES, first) {
        Some("place")
    } else {
        None
    }
}

/// Words a session uses in lowercase: a capitalised word that is also
/// written lowercase there is a common word at a sentence start or in a
/// title ("Painting's great", "Family is everything"), not a name.
pub(crate) fn lowercase_words(turns: &[TranscriptTurn]) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    // a turn typed all in lowercase ("ok i will go to afuri") says nothing about
    // which of its words are names
    for t in turns.iter().filter(|t| t.text.chars().any(char::is_uppercase)) {
        for w in t.text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-')) {
            let w = w.trim_end_matches("'s").trim_end_matches("’s").trim_matches(|c: char| c == '\'' || c == '’' || c == '-');
            if w.chars().next().is_some_and(|c| c.is_lowercase()) {
                out.insert(w.to_string());
            }
        }
    }
    out
}

/// Whether a capitalised span found without any pattern around it is kept:
/// not a one-word common word of the session (written lowercase there),
/// not shouting ("DOING"), unless its own words type it.
pub(crate) fn weak_name_ok(name: &str, lower: &std::collections::HashSet<String>) -> bool {
    if name.contains(' ') || type_cue(name).is_some() {
        return true;
    }
    let l = name.to_lowercase();
    if lower.contains(&l) {
        return false;
    }
    let letters: Vec<char> = name.chars().filter(|c| c.is_alphabetic()).collect();
    let shouting = letters.len() > 3 && letters.iter().all(|c| c.is_uppercase());
    !(shouting && (lexicon::contains(lexicon::OPENERS, &l) || lower.iter().any(|w| w.eq_ignore_ascii_case(&l))))
}

/// True when `out` already holds an entity named `name` (by identity key).
fn known(out: &Extraction, name: &str) -> bool {
    let key = crate::graph::identity_key(name);
    out.entities.iter().any(|e| crate::graph::identity_key(&e.name) == key)
}

/// Adds (or types) an entity mention.
fn mention(out: &mut Extraction, name: &str, kind: &str) {
    let key = crate::graph::identity_key(name);
    if key.is_empty() {
        return;
    }
    let kind = if kind == UNKNOWN_TYPE { type_cue(name).unwrap_or(kind) } else { kind };
    if let Some(m) = out
        .entities
        .iter_mut()
        .find(|m| crate::graph::identity_key(&m.name) == key)
    {
        if m.kind == UNKNOWN_TYPE && kind != UNKNOWN_TYPE {
            m.kind = kind.to_string();
        }
        return;
    }
    out.entities.push(EntityMention {
        name: name.to_string(),
        kind: kind.to_string(),
        aliases: vec![],
    });
}

/// Predicates whose object changes over time (a restatement after a change is a new fact).
const CHANGING: &[&str] = &["lives_in", "moved_to", "works_at", "member_of"];

pub(super) fn relate(
    out: &mut Extraction,
    s: &str,
    p: &str,
    o: &str,
    at: Option<chrono::DateTime<chrono::Utc>>,
) {
    let (ks, ko) = (crate::graph::identity_key(s), crate::graph::identity_key(o));
    if ks == ko {
        return;
    }
    let same = |r: &RelationMention| {
        crate::graph::identity_key(&r.source) == ks
            && r.predicate == p
            && crate::graph::identity_key(&r.target) == ko
    };
    if CHANGING.contains(&p) {
        // "Seattle, then Portland, then Seattle again" keeps all three; a plain repeat does not
        let last = out.relations.iter().rev().find(|r| {
            crate::graph::identity_key(&r.source) == ks
                && CHANGING.contains(&r.predicate.as_str())
                && (r.predicate == p
                    || (p == "moved_to" || p == "lives_in")
                        && (r.predicate == "moved_to" || r.predicate == "lives_in"))
        });
        if last
            .map(|r| crate::graph::identity_key(&r.target) == ko)
            .unwrap_or(false)
        {
            return;
        }
    } else if out.relations.iter().any(same) {
        return;
    }
    out.relations.push(RelationMention {
        source: s.to_string(),
        predicate: p.to_string(),
        target: o.to_string(),
        valid_from: at,
    });
}

/// The cue patterns of one sentence: pets, roles, likes, plays, titled
/// works, visits, memberships, creations and CJK or Vietnamese honorifics
/// (each names its entity's type; first person binds to a named speaker).
fn cued(
    p: &Patterns,
    sentence: &str,
    speaker: &str,
    at: Option<chrono::DateTime<chrono::Utc>>,
    ctx: &TurnContext,
    out: &mut Extraction,
    related: &mut Vec<(String, String)>,
    last_named: &mut Option<String>,
) {
    let me = named(speaker).then(|| speaker.to_string());
    for c in p.pet.captures_iter(sentence) {
        let Some(y) = clean_name(&c["y"]) else { continue };
        mention(out, &y, "pet");
        // "my dog Max", or "we got another cat named Bailey": the speaker's pet
        let own = c["own"].to_lowercase();
        let got = sentence.contains("I got") || sentence.contains("we got") || sentence.contains("We got") || sentence.contains("adopted");
        if let (Some(me), true) = (&me, own == "my" || own == "our" || (got && (own == "a" || own == "another"))) {
            relate(out, me, "owns_pet", &y, at);
            related.push((me.clone(), y.clone()));
        }
        *last_named = Some(y);
    }
    if let Some(me) = &me {
        for c in p.role.captures_iter(sentence) {
            let r = c["r"].to_lowercase();
            mention(out, &r, "role");
            relate(out, me, "works_as", &r, at);
        }

        for c in p.plays.captures_iter(sentence) {
            let a = c["a"].to_lowercase();
            mention(out, &a, "activity");
            relate(out, me, "plays", &a, at);
        }
        // "I'm going to Tokyo next month" is a plan (speaker_cues), not a visit
        let planned = p.plans_visit.is_match(sentence);
        for c in p.visit.captures_iter(sentence).filter(|_| !planned) {
            if let Some(y) = clean_name(&c["y"]) {
                let kind = out
                    .entities
                    .iter()
                    .find(|e| crate::graph::identity_key(&e.name) == crate::graph::identity_key(&y))
                    .map(|e| e.kind.clone());
                if matches!(kind.as_deref(), Some("person") | Some("pet")) {
                    continue;
                }
                mention(out, &y, "place");
                // "I'm going to Vancouver to see Mark", "I will go to Osaka", "want to visit
                // Kyoto": the progressive, a modal or an infinitive before "go"/"visit" is a plan
                // "Sara and Mikael went to Malmö": their trip, not the speaker's
                if third_person_subject(&sentence[..c.get(0).map_or(0, |m| m.start())]) {
                    continue;
                }
                let before = sentence[..c.get(0).map_or(0, |m| m.start())].trim_end().to_lowercase();
                let modal = before.ends_with(" to") || before.ends_with(" will") || before.ends_with("'ll") || before.ends_with("’ll") || before.ends_with(" gonna");
                let planned = &c["v"] == "going" || (matches!(&c["v"], "go" | "visit") && modal);
                let predicate = if planned { "plans_to_visit" } else { "visited" };
                relate(out, me, predicate, &y, at);
                related.push((me.clone(), y));
            }
        }
        // the speaker's relation to the name the pattern captures, typed by the pattern
        for (re, kind, predicate) in [
            (&p.member, "organization", "member_of"),
            (&p.created, "work", "created"),
        ] {
            for c in re.captures_iter(sentence) {
                if let Some(y) = clean_name(&c["y"]) {
                    mention(out, &y, kind);
                    relate(out, me, predicate, &y, at);
                    related.push((me.clone(), y));
                }
            }
        }
    }
    for c in p.work.captures_iter(sentence) {
        if let Some(y) = clean_name(&c["y"]) {
            mention(out, &y, "work");
        }
    }
    // "\"Becoming Nicole\" by Amy Ellis Nutt", "Ed Sheeran's \"Perfect\"": the maker created the title
    for c in p.by_author.captures_iter(sentence).chain(p.authors_title.captures_iter(sentence)) {
        let Some(title) = c.name("t").or(c.name("t2")).and_then(|t| clean_title(t.as_str())) else { continue };
        mention(out, &title, "work");
        for a in [c.name("a"), c.name("b")].into_iter().flatten() {
            if let Some(a) = clean_name(a.as_str()) {
                mention(out, &a, UNKNOWN_TYPE);
                relate(out, &a, "created", &title, at);
                related.push((a, title.clone()));
            }
        }
    }
    for c in p.name_my_pet.captures_iter(sentence) {
        let Some(y) = clean_name(&c["y"]) else { continue };
        mention(out, &y, "pet");
        if let Some(me) = &me {
            relate(out, me, "owns_pet", &y, at);
            related.push((me.clone(), y.clone()));
        }
    }
    if let Some(me) = &me {
        speaker_cues(p, sentence, me, ctx, at, out, related);
    }
    for c in p.honorific.captures_iter(sentence) {
        let Some(y) = c.name("ko").or(c.name("ja")).or(c.name("vi")) else { continue };
        if let Some(name) = honorific_name(sentence, y.start(), y.as_str()) {
            mention(out, &name, "person");
            *last_named = Some(name);
        }
    }
}

/// The person an honorific names, given the word before the suffix (`word`,
/// at byte `at` of `sentence`): the word itself, unless it is a title or
/// kinship term ([`crate::text::lexicon::Lexicon::honorific_titles`]). Then
/// the name is what stands before the title: in Korean the word before it
/// ("김민수 팀장님" → 김민수; "팀장님" or "우리 팀장님" alone name no one), in
/// Japanese the characters the title ends ("田中部長さん" → 田中; "お母さん" →
/// no one).
fn honorific_name(sentence: &str, at: usize, word: &str) -> Option<String> {
    static TITLES: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    static NOT_NAMES: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    let titles = TITLES.get_or_init(|| crate::text::lexicon::union(|l| &l.honorific_titles));
    let not_names = NOT_NAMES.get_or_init(|| {
        let mut s = crate::text::lexicon::union(|l| &l.stop_words);
        s.extend(crate::text::lexicon::union(|l| &l.first_person));
        s.extend(crate::text::lexicon::union(|l| &l.time_words));
        s
    });
    if !titles.contains(word) {
        // "田中部長": a name the title ends
        return match titles.iter().filter(|t| word.len() > t.len() && word.ends_with(**t)).max_by_key(|t| t.len()) {
            Some(t) => Some(word[..word.len() - t.len()].to_string()),
            None => Some(word.to_string()),
        };
    }
    let before = sentence[..at].trim_end();
    let prev: String = before.chars().rev().take_while(|c| ('가'..='힣').contains(c)).collect::<Vec<_>>().into_iter().rev().collect();
    let n = prev.chars().count();
    // a word with a case particle ("기념으로 강사님", "회사에서 팀장님") is no bare name; the
    // particles that also end common given names (은, 이, 서, 도, ...) are not counted
    let particle = ["으로", "에서", "에게", "한테", "까지", "부터", "처럼", "보다", "로", "를", "을", "에", "의", "께"]
        .iter()
        .any(|p| prev.ends_with(p));
    // the title stands apart from the word before it (trailing whitespace was trimmed)
    let apart = before.len() < at;
    ((2..=4).contains(&n) && apart && !particle && !not_names.contains(prev.as_str()) && !titles.contains(prev.as_str())).then_some(prev)
}

/// What a sentence's cues may need from the rest of its turn and session.
struct TurnContext {
    /// The one other named speaker of the session (the "you" of a two-party chat).
    other: Option<String>,
    /// The turn speaks of a pet ([`lexicon::PET_CONTEXT`]).
    pet_turn: bool,
}

/// Cues bound to a named speaker (`me`): liked things, favourites, sports,
/// named games, attended events, groups joined, things made, plans to visit,
/// friendship with the other speaker, pets named in a pet turn, roles.
fn speaker_cues(
    p: &Patterns,
    sentence: &str,
    me: &str,
    ctx: &TurnContext,
    at: Option<chrono::DateTime<chrono::Utc>>,
    out: &mut Extraction,
    related: &mut Vec<(String, String)>,
) {
    let mut link = |out: &mut Extraction, predicate: &str, y: &str, kind: &str| {
        mention(out, y, kind);
        relate(out, me, predicate, y, at);
        related.push((me.to_string(), y.to_string()));
    };
    let first_person = sentence.split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’').any(|w| {
        matches!(w, "I" | "I'm" | "I’m" | "I've" | "I’ve" | "my" | "My" | "me" | "we" | "We" | "our" | "Our")
    });
    for c in p.likes_any.captures_iter(sentence) {
        for (y, kind) in liked_objects(&c, sentence) {
            link(out, "likes", &y, kind);
        }
    }
    for c in p.favorite.captures_iter(sentence) {
        let named = c.name("s").or(c.name("fan")).map(|m| m.as_str());
        let liked = match named {
            Some(s) if s.starts_with(['"', '“']) => clean_title(s.trim_matches(|c| c == '"' || c == '“' || c == '”')).map(|t| (t, "work")),
            Some(s) => clean_name(s).map(|n| (n, UNKNOWN_TYPE)),
            None => liked_objects(&c, sentence).into_iter().next(),
        };
        if let Some((y, kind)) = liked {
            link(out, "likes", &y, kind);
        }
    }
    if first_person {
        for c in p.sport.captures_iter(sentence) {
            // "started playing chess": the verb before the sport is no part of it
            let a = c["a"].to_lowercase();
            let a = match a.split_once(' ') {
                Some((w, rest)) if w.ends_with("ing") && !lexicon::contains(lexicon::SPORTS, &a) => rest.to_string(),
                _ => a,
            };
            if let Some(a) = value_phrase(&a, 3) {
                link(out, "plays", &a, "activity");
            }
        }
        for c in p.plays_named.captures_iter(sentence) {
            let y = match (c.name("q"), c.name("n")) {
                (Some(q), _) => clean_title(q.as_str()),
                (_, Some(n)) => clean_name(n.as_str()),
                _ => None,
            };
            if let Some(y) = y.filter(|y| !lexicon::contains(lexicon::GIVEN_NAMES, &crate::graph::identity_key(y))) {
                link(out, "plays", &y, "work");
            }
        }
        for c in p.attended.captures_iter(sentence) {
            if let Some(e) = c.name("e").or(c.name("e2")).and_then(|e| value_phrase(&e.as_str().to_lowercase(), 5)) {
                link(out, "attended", &e, "topic");
            }
            if let Some(y) = c.name("y").and_then(|y| clean_name(y.as_str())) {
                link(out, "visited", &y, "place");
            }
        }
        for c in p.joined_group.captures_iter(sentence) {
            if let Some(g) = value_phrase(&c["g"].to_lowercase().replace(" for ", " "), 5) {
                link(out, "member_of", &g, "topic");
            }
        }
        for c in p.made.captures_iter(sentence) {
            if let Some(y) = c.name("y").or(c.name("y2")).and_then(|y| value_phrase(&y.as_str().to_lowercase(), 3)) {
                link(out, "created", &y, "topic");
            }
        }
        for c in p.as_role.captures_iter(sentence) {
            let r = c["r"].to_lowercase();
            if !r.starts_with("kid") {
                link(out, "works_as", &r, "role");
            }
        }
    }
    for c in p.plans_visit.captures_iter(sentence) {
        // "My boss Linda is planning a trip to Tokyo": Linda's plan, not the speaker's
        if third_person_subject(&sentence[..c.get(0).map_or(0, |m| m.start())]) {
            continue;
        }
        if let Some(y) = c.name("y").or(c.name("y2")).and_then(|y| clean_name(y.as_str())) {
            link(out, "plans_to_visit", &y, "place");
        }
    }
    if ctx.pet_turn {
        for c in p.pet_name_is.captures_iter(sentence) {
            if let Some(y) = clean_name(&c["y"]) {
                link(out, "owns_pet", &y, "pet");
            }
        }
    }
    if let Some(other) = &ctx.other {
        if p.friend_you.is_match(sentence) {
            link(out, "friend_of", other, "person");
        }
    }
    for c in p.my_friends.captures_iter(sentence) {
        for f in [c.name("a"), c.name("b")].into_iter().flatten() {
            if let Some(f) = clean_name(f.as_str()) {
                link(out, "friend_of", &f, "person");
            }
        }
    }
}

/// True when the subject nearest before a verb phrase (`before`: the
/// sentence up to it) is a third person: reading back from the verb, a
/// third-person pronoun ("she", "they") or a capitalised word that does not
/// open the sentence ("my boss Linda is …", "Emma and her husband Carlos
/// want …") comes before any "I" or "we". Nothing before the verb ("Can't
/// wait to visit Tokyo") is the speaker, as chat drops "I".
fn third_person_subject(before: &str) -> bool {
    let words: Vec<&str> = before
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .filter(|w| !w.is_empty())
        .collect();
    let function_word = |w: &str| crate::text::lexicon::english().stop_words.iter().any(|s| s == w);
    for (i, w) in words.iter().enumerate().rev() {
        let bare = w.split(['\'', '’']).next().unwrap_or(w);
        let lower = bare.to_lowercase();
        // "My sister wants…", "my parents are planning…": a person the speaker names by kin, as
        // the subject (the possessive opens the clause; "I took my family on a trip" is an object)
        let kin = i == 1
            && matches!(words[0].to_lowercase().as_str(), "my" | "his" | "her" | "our" | "their")
            && (KIN.split('|').any(|k| k == lower || format!("{k}s") == lower) || matches!(lower.as_str(), "parents" | "kids" | "family" | "folks"));
        if function_word(&lower) && !matches!(lower.as_str(), "i" | "we" | "he" | "she" | "they") {
            continue;
        }
        match bare {
            "I" | "we" | "We" => return false,
            "he" | "she" | "they" | "He" | "She" | "They" => return true,
            _ if kin => return true,
            _ if i > 0 && bare.chars().next().is_some_and(char::is_uppercase) => return true,
            // opening the sentence, a given name or a name with a clitic ("Linda's been planning")
            _ if i == 0 && (lexicon::contains(lexicon::GIVEN_NAMES, &lower) || (bare.len() < w.len() && bare.chars().next().is_some_and(char::is_uppercase))) => return true,
            _ => {}
        }
    }
    false
}

/// True when `speaker` is a real name (not a role label).
fn named(speaker: &str) -> bool {
    !matches!(
        speaker.trim().to_lowercase().as_str(),
        "" | "user" | "assistant" | "system" | "tool"
    )
}

/// Extracts entities and relations from a session's turns.
pub fn extract(turns: &[TranscriptTurn]) -> Extraction {
    let p = patterns();
    let mut out = Extraction::default();
    let mut last_named: Option<String> = None;
    let lower = lowercase_words(turns);
    let mut speakers: Vec<String> = Vec::new();
    for t in turns {
        let s: String = t.speaker.nfkc().collect();
        let s = s.trim().to_string();
        if named(&s) && !speakers.contains(&s) {
            speakers.push(s);
        }
    }
    // the sentences each name was seen in (lowercase), for typing by context at the end
    let mut seen_in: Vec<(String, String, bool)> = Vec::new();
    for t in turns {
        // NFKC first: full-width letters and compatibility forms become plain letters
        let speaker_nfkc: String = t.speaker.nfkc().collect();
        let text: String = t.text.nfkc().collect();
        let speaker = speaker_nfkc.trim();
        if named(speaker) {
            mention(&mut out, speaker, "person");
        }
        let ctx = TurnContext {
            other: (speakers.len() == 2).then(|| speakers.iter().find(|s| s.as_str() != speaker).cloned()).flatten(),
            pet_turn: text
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| lexicon::contains(lexicon::PET_CONTEXT, &w.to_lowercase())),
        };
        for sentence in split_sentences(&text) {
            let resolve = |s: &str, last: &Option<String>| -> Option<String> {
                if s == "I" || s.starts_with("I'") || s.starts_with("I’") || s == "I am" || s == "We" || s == "we" {
                    // first person, singular or plural (the speaker is one of "we"):
                    // the speaker, when the speaker has a name
                    named(speaker).then(|| speaker.to_string())
                } else if PRONOUNS.contains(&s.to_lowercase().as_str()) {
                    last.clone()
                } else {
                    clean_name(s)
                }
            };
            let mut related_pairs: Vec<(String, String)> = Vec::new();
            // "X's sister Y"
            for c in p.possessive_kin.captures_iter(sentence) {
                if let (Some(x), Some(y)) = (clean_name(&c["x"]), clean_name(&c["y"])) {
                    mention(&mut out, &x, "person");
                    mention(&mut out, &y, "person");
                    relate(
                        &mut out,
                        &y,
                        &kin_predicate(&c["k"].to_lowercase()),
                        &x,
                        t.at,
                    );
                    related_pairs.push((x, y));
                }
            }
            // "my sister Y"
            for c in p.my_kin.captures_iter(sentence) {
                if let Some(y) = clean_name(&c["y"]) {
                    mention(&mut out, &y, "person");
                    if named(speaker) {
                        relate(
                            &mut out,
                            &y,
                            &kin_predicate(&c["k"].to_lowercase()),
                            speaker,
                            t.at,
                        );
                        related_pairs.push((speaker.to_string(), y.clone()));
                    }
                    last_named = Some(y);
                }
            }
            // "X verb Y", with pronoun subjects resolved to the last named entity
            for c in p.verb.captures_iter(sentence) {
                let Some(s) = resolve(&c["s"], &last_named) else {
                    continue;
                };
                // "X lives in Y and works at Z": both clauses share the subject
                let clauses = [(c.name("v"), c.name("o")), (c.name("v2"), c.name("o2"))];
                for (v, o) in clauses {
                    let (Some(v), Some(o)) = (v, o) else { continue };
                    let Some(o) = clean_name(o.as_str()) else {
                        continue;
                    };
                    let (pred, otype) = predicate_of(&v.as_str().to_lowercase());
                    let stype = if matches!(
                        pred,
                        "adopted" | "works_at" | "mentors" | "married_to" | "lives_in" | "moved_to"
                    ) {
                        "person"
                    } else {
                        UNKNOWN_TYPE
                    };
                    mention(&mut out, &s, stype);
                    mention(&mut out, &o, otype);
                    relate(&mut out, &s, pred, &o, t.at);
                    related_pairs.push((s.clone(), o));
                }
            }
            cued(p, sentence, speaker, t.at, &ctx, &mut out, &mut related_pairs, &mut last_named);
            // every name of the sentence; the last one becomes the pronoun antecedent
            let mut names: Vec<String> = Vec::new();
            // where the sentence's first word begins: after Spanish opening marks ("¡Genial!",
            // "¿Sabes?"), brackets, dashes and list bullets (not quotes, which open titles)
            let opening = |c: char| c.is_whitespace() || matches!(c, '¡' | '¿' | '(' | '[' | '-' | '–' | '—' | '*' | '•');
            let lead = sentence.len() - sentence.trim_start_matches(opening).len();
            let first_word_end = sentence[lead..].find(char::is_whitespace).map_or(sentence.len(), |e| lead + e);
            let mut initial_candidate = false;
            let spans = p.span.find_iter(sentence).flat_map(|m| {
                // "Tokyo's Times Square": two names
                let text = m.as_str();
                let mut parts = Vec::new();
                let mut from = 0;
                for (i, apostrophe) in text.match_indices(['\'', '’']) {
                    let rest = &text[i + apostrophe.len()..];
                    // a name after the possessive ("Tokyo's Times Square"), not a title ("Charlotte's Web")
                    let after = rest.get(2..).unwrap_or("");
                    if rest.starts_with("s ") && (after.contains(' ') || type_cue(after).is_some()) {
                        parts.push((m.start() + from, &text[from..i]));
                        from = i + apostrophe.len() + 2;
                    }
                }
                if from < text.len() {
                    parts.push((m.start() + from, &text[from..]));
                }
                parts
            });
            for (start, raw) in spans {
                // "Exploring Japan" opening a sentence: the verb form is no part of the name
                let raw = match raw.split_once(' ') {
                    Some((first, rest)) if start == lead && (first.ends_with("ing") || first.ends_with("in'")) => rest,
                    // "В Казани", "На Байкале": a word of one or two letters opening the
                    // sentence that the session also writes in lowercase is a preposition or
                    // an article, not part of the name (no list: the session's own spelling)
                    Some((first, rest)) if start == lead && first.chars().count() <= 2 && lower.contains(&first.to_lowercase()) => rest,
                    // "Later Dana Whitfield texted…" after "Dana Whitfield" was named: the
                    // word opening the sentence is no part of a name the session already knows
                    Some((_, rest)) if start == lead && clean_name(rest).is_some_and(|r| known(&out, &r)) => rest,
                    // "¡Hola Lucía!", "Gracias Marco": a greeting opening the sentence, or a
                    // thanks before one given name, is no part of the name
                    Some((first, rest)) if start == lead && opening_interjection(first, rest) => rest,
                    _ => raw,
                };
                let Some(n) = clean_name(raw) else {
                    continue;
                };
                // a single capitalised word opening the sentence is only a name if seen elsewhere as one
                let first_word = sentence[lead..first_word_end].trim_end_matches(|c: char| c.is_ascii_punctuation());
                // ("Στις 9 Φεβρουαρίου": a sentence-opening word and a number is no title)
                let words: Vec<&str> = n.split(' ').filter(|w| !w.chars().all(|c| c.is_ascii_digit())).collect();
                let sentence_initial = start == lead
                    && words.len() == 1
                    && first_word.trim_end_matches("'s").trim_end_matches("’s") == words[0];
                let known = known(&out, &n);
                // "I'm Tired", "feeling so Blessed", "I'm Vegan": one capitalised word after a
                // copula or an intensifier is an adjective written for emphasis, not a name
                let predicative = {
                    // the span may begin before the name ("I'm Tired" is one capitalised span)
                    let at = sentence[start..].find(n.as_str()).map_or(start, |i| start + i);
                    let before = sentence[..at].trim_end().to_lowercase();
                    let last = before.rsplit(|c: char| c.is_whitespace()).next().unwrap_or("");
                    matches!(last, "i'm" | "i’m" | "am" | "feel" | "feeling" | "felt" | "so" | "very" | "really" | "too" | "totally")
                };
                if predicative && words.len() == 1 && !known && !lexicon::contains(lexicon::GIVEN_NAMES, &n.to_lowercase()) {
                    continue;
                }
                if sentence_initial && !known {
                    // not an entity, but maybe a person: a later "she" stays ambiguous
                    if weak_name_ok(&n, &lower) {
                        initial_candidate = true;
                    }
                    continue;
                }
                if !known && !weak_name_ok(&n, &lower) {
                    continue;
                }
                mention(&mut out, &n, UNKNOWN_TYPE);
                seen_in.push((crate::graph::identity_key(&n), sentence.to_lowercase(), ctx.pet_turn));
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            // the antecedent of a later "he"/"she"/"they": the sentence's one person
            // (or its one name of unknown type when no person is named); places,
            // organisations and ambiguous sentences ("Tom met Sara") give none
            if !names.is_empty() {
                let kind_of = |n: &str| {
                    out.entities
                        .iter()
                        .find(|e| crate::graph::identity_key(&e.name) == crate::graph::identity_key(n))
                        .map(|e| e.kind.clone())
                };
                let persons: Vec<&String> = names
                    .iter()
                    .filter(|n| {
                        kind_of(n).as_deref() == Some("person")
                            && !(named(speaker) && n.as_str() == speaker)
                    })
                    .collect();
                let unknown: Vec<&String> = names
                    .iter()
                    .filter(|n| kind_of(n).as_deref() == Some(UNKNOWN_TYPE))
                    .collect();
                last_named = match (persons.as_slice(), unknown.as_slice()) {
                    _ if initial_candidate => None,
                    ([one], _) => Some((*one).clone()),
                    ([], [one]) => Some((*one).clone()),
                    _ => None,
                };
            }
            // who talks about whom: a named speaker `mentions` every other name said
            if named(speaker) {
                for n in &names {
                    if crate::graph::identity_key(n) != crate::graph::identity_key(speaker) {
                        relate(&mut out, speaker, "mentions", n, t.at);
                    }
                }
            }
            let names: Vec<String> = names.into_iter().take(MAX_COOCCURRING_NAMES).collect();
            // (typing by context happens once the whole session was read: see type_by_context)
            for i in 0..names.len() {
                for j in i + 1..names.len() {
                    let (a, b) = (&names[i], &names[j]);
                    let linked = related_pairs.iter().any(|(x, y)| {
                        let (x, y) = (crate::graph::identity_key(x), crate::graph::identity_key(y));
                        let (ka, kb) = (crate::graph::identity_key(a), crate::graph::identity_key(b));
                        (x == ka && y == kb) || (x == kb && y == ka)
                    });
                    if !linked {
                        relate(&mut out, a, "mentioned_with", b, t.at);
                    }
                }
            }
        }
    }
    self_introductions(turns, &mut out);
    fold_short_forms(&mut out);
    type_by_context(&mut out, &seen_in);
    out
}

/// "Hi, I'm Nora Lindqvist", "my name is Nora", "call me Nora": a named
/// speaker (the user's node is named by `user_id` until a name is given,
/// [`crate::worker`]) introducing themself. The name becomes an alias of the
/// speaker's entity, its relations move there, so the user is one node that
/// "Nora Lindqvist" finds, not two. "I'm X" counts only when X is two or
/// three capitalised words or starts with a common given name
/// ([`lexicon::GIVEN_NAMES`]: "I'm Korean" introduces no one), and the name
/// must end the clause ("I'm Sam's mom" is not Sam). Chat written in
/// lowercase introduces with a lexicon given name alone ("hi i'm nora!",
/// "my name is nora", "call me nora"; not "i'm tired", nor "call me maybe").
fn self_introductions(turns: &[TranscriptTurn], out: &mut Extraction) {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(&format!(
            r"(?:(?:^|[.!?,;]\s*|\b(?:[Hh]i|[Hh]ello|[Hh]ey|[Oo]h)\s+)(?P<v>I['’]m|I am)|\b(?:[Mm]y (?:full |real |first )?name(?: is|['’]s)|[Cc]all me))\s+(?P<n>\p{{Lu}}{c}+(?:\s+\p{{Lu}}{c}+){{0,2}})(?:\s*$|\s*[.!?,;:)]|\s+(?:and|from|here|btw|by the way)\b)",
            c = NAME_CHAR
        ))
        .expect("self-introduction regex")
    });
    static LOWER: OnceLock<Regex> = OnceLock::new();
    let lower = LOWER.get_or_init(|| {
        Regex::new(r"(?:^|[.!?,;]\s*|\b(?i:hi|hello|hey)\s+)(?i:i['’]m|i am|my (?:full |real |first )?name(?: is|['’]s)|call me)\s+(?P<n>\p{Ll}+)(?:\s*$|\s*[.!?,;:)]|\s+(?:and|from|here|btw|by the way)\b)")
            .expect("lowercase self-introduction regex")
    });
    let mut found: Vec<(String, String)> = Vec::new();
    for t in turns {
        let speaker: String = t.speaker.nfkc().collect();
        let speaker = speaker.trim();
        if !named(speaker) {
            continue;
        }
        let text: String = t.text.nfkc().collect();
        // chat written in lowercase ("hi i'm nora!", "my name is nora"): a given name
        // from the lexicon, alone, written as a name
        for c in lower.captures_iter(&text) {
            let w = &c["n"];
            if lexicon::contains(lexicon::GIVEN_NAMES, w) {
                let mut cs = w.chars();
                let n: String = cs.next().into_iter().flat_map(char::to_uppercase).chain(cs).collect();
                if crate::graph::identity_key(&n) != crate::graph::identity_key(speaker) {
                    found.push((n, speaker.to_string()));
                }
            }
        }
        for c in re.captures_iter(&text) {
            let Some(n) = clean_name(&c["n"]) else { continue };
            let given = n.split(' ').next().is_some_and(|w| lexicon::contains(lexicon::GIVEN_NAMES, &w.to_lowercase()));
            let plain_i = c.name("v").is_some();
            if plain_i && !(n.contains(' ') || given) {
                continue;
            }
            if type_cue(&n).is_some_and(|t| t != "person") || crate::graph::identity_key(&n) == crate::graph::identity_key(speaker) {
                continue;
            }
            found.push((n, speaker.to_string()));
        }
    }
    // the first name of a full name too ("Nice to meet you, Nora!" after "I'm Nora Lindqvist")
    let firsts: Vec<(String, String)> = found
        .iter()
        .filter_map(|(n, sp)| n.split_once(' ').map(|(f, _)| (f.to_string(), sp.clone())))
        .filter(|(f, sp)| lexicon::contains(lexicon::GIVEN_NAMES, &f.to_lowercase()) && crate::graph::identity_key(f) != crate::graph::identity_key(sp))
        .collect();
    found.extend(firsts);
    for (name, speaker) in found {
        mention(out, &speaker, "person");
        fold_into(out, &name, &speaker);
    }
}

/// Makes `name` an alias of the entity `into` (which must exist): the entity
/// of that identity key goes, the relations naming it move to `into`, and a
/// relation left joining `into` to itself goes. The one mechanism of short
/// forms ([`fold_short_forms`]) and self-introductions.
fn fold_into(out: &mut Extraction, name: &str, into: &str) {
    let key = crate::graph::identity_key(name);
    out.entities.retain(|e| crate::graph::identity_key(&e.name) != key);
    if let Some(p) = out.entities.iter_mut().find(|e| e.name == into) {
        if !p.aliases.iter().any(|a| a == name) {
            p.aliases.push(name.to_string());
        }
    }
    for r in &mut out.relations {
        for end in [&mut r.source, &mut r.target] {
            if crate::graph::identity_key(end) == key {
                *end = into.to_string();
            }
        }
    }
    out.relations.retain(|r| crate::graph::identity_key(&r.source) != crate::graph::identity_key(&r.target));
}

/// "Mel" and "Caro" in a session where "Melanie" and "Caroline" are persons:
/// a one-word name of unknown type that begins exactly one person's first
/// name (3 letters or more) becomes that person's alias, and its relations
/// move to the person.
fn fold_short_forms(out: &mut Extraction) {
    let persons: Vec<(usize, String)> = out
        .entities
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == "person")
        .map(|(i, e)| (i, crate::graph::identity_key(&e.name)))
        .collect();
    let mut folded: Vec<(String, String)> = Vec::new();
    for e in &out.entities {
        let k = crate::graph::identity_key(&e.name);
        if e.kind != UNKNOWN_TYPE || k.contains(' ') || k.chars().count() < 3 {
            continue;
        }
        let owners: Vec<&(usize, String)> = persons
            .iter()
            .filter(|(_, p)| {
                let first = p.split(' ').next().unwrap_or(p);
                first.len() > k.len() && first.starts_with(&k)
            })
            .collect();
        if let [(i, _)] = owners.as_slice() {
            folded.push((e.name.clone(), out.entities[*i].name.clone()));
        }
    }
    for (short, full) in folded {
        fold_into(out, &short, &full);
    }
}

/// Types the entities no pattern typed, from their names and the sentences
/// they were seen in, first rule first (the gazetteers typed theirs on
/// mention, [`type_cue`]): a one-word name said
/// in a turn about pets ([`lexicon::PET_CONTEXT`]) that is no common given
/// name, or is one and was never seen outside such turns; a name whose first
/// word is a common given name ([`lexicon::GIVEN_NAMES`]); a name quoted, or
/// said in a sentence about books, games or films ([`lexicon::WORK_CONTEXT`]),
/// or ending in a sequel number ("FIFA 23", "Civilization VI"): `work`.
fn type_by_context(out: &mut Extraction, seen_in: &[(String, String, bool)]) {
    for e in out.entities.iter_mut().filter(|e| e.kind == UNKNOWN_TYPE) {
        let key = crate::graph::identity_key(&e.name);
        let seen: Vec<&(String, String, bool)> = seen_in.iter().filter(|(k, _, _)| *k == key).collect();
        let first = key.split(' ').next().unwrap_or(&key);
        let given = lexicon::contains(lexicon::GIVEN_NAMES, first);
        let pet_turns = seen.iter().filter(|(_, _, pet)| *pet).count();
        let in_work_sentence = seen.iter().any(|(_, s, _)| {
            s.split(|c: char| !c.is_alphanumeric()).any(|w| lexicon::contains(lexicon::WORK_CONTEXT, w))
        });
        let quoted = seen.iter().any(|(_, s, _)| {
            ["\"", "“", "'", "‘"].iter().any(|q| s.contains(&format!("{q}{key}")))
        });
        let last = key.rsplit(' ').next().unwrap_or(&key);
        let sequel = key.contains(' ')
            && (last.chars().all(|c| c.is_ascii_digit()) || matches!(last, "ii" | "iii" | "iv" | "v" | "vi" | "vii" | "viii" | "ix" | "x"));
        // "We hiked in the Alps. My dog loves it there.": a name after "in", "at" or "from" is a
        // place, whatever turn it is in (no pet is hiked in)
        let after_place_word = seen.iter().any(|(_, s, _)| {
            ["in", "at", "from", "near"].iter().any(|w| s.contains(&format!(" {w} {key}")) || s.contains(&format!(" {w} the {key}")))
        });
        let kind = if !key.contains(' ') && pet_turns > 0 && !after_place_word && (!given || pet_turns == seen.len()) {
            "pet"
        } else if given {
            "person"
        } else if quoted || sequel || in_work_sentence {
            "work"
        } else {
            continue;
        };
        e.kind = kind.to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(s: &str, t: &str) -> TranscriptTurn {
        TranscriptTurn {
            speaker: s.into(),
            text: t.into(),
            at: None,
        }
    }

    fn has(ex: &Extraction, s: &str, p: &str, o: &str) -> bool {
        ex.relations
            .iter()
            .any(|r| r.source == s && r.predicate == p && r.target == o)
    }

    #[test]
    fn pronouns_resolve_to_the_last_named_person_not_the_speaker() {
        let ex = extract(&[turn(
            "Mina",
            "My colleague Dana joined in May. She also mentors Sam.",
        )]);
        assert!(has(&ex, "Dana", "mentors", "Sam"), "{:?}", ex.relations);
        assert!(
            !ex.relations
                .iter()
                .any(|r| r.source == "Mina" && r.predicate == "mentors"),
            "{:?}",
            ex.relations
        );
        assert!(has(&ex, "Dana", "colleague_of", "Mina"));
        assert!(
            !ex.entities.iter().any(|e| e.name == "May"),
            "months are not entities"
        );
    }

    #[test]
    fn a_name_ends_where_an_unspaced_script_begins_and_an_opening_word_with_a_number_is_none() {
        let ex = extract(&[turn("user", "对了，Starlit的终面过了！我下周去Starlit上班。")]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(names.contains(&"Starlit") && !names.iter().any(|n| n.contains('的')), "{names:?}");
        let ex = extract(&[turn("user", "Στις 9 πήγαμε στη Θεσσαλονίκη. Season 5 of The Office is next.")]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(!names.iter().any(|n| n.starts_with("Στις") || n.starts_with("Season")), "{names:?}");
        assert!(names.contains(&"Θεσσαλονίκη"), "{names:?}");
        let ex = extract(&[turn("user", "어제 Starlit에서 최종 면접 봤어요")]);
        assert!(ex.entities.iter().any(|e| e.name == "Starlit"), "{:?}", ex.entities);
        // a turn typed all lowercase is no evidence that a word is common
        let ex = extract(&[turn("assistant", "Great choice, Afuri is famous for yuzu ramen."), turn("user", "ok i will go to afuri")]);
        assert!(ex.entities.iter().any(|e| e.name == "Afuri"), "{:?}", ex.entities);
        // a modal or an infinitive before "go" or "visit" is a plan
        for t in ["I will go to Osaka in May.", "I want to visit Osaka soon.", "I'm going to Osaka!"] {
            let ex = extract(&[turn("Ana", t)]);
            assert!(has(&ex, "Ana", "plans_to_visit", "Osaka") && !has(&ex, "Ana", "visited", "Osaka"), "{t}: {:?}", ex.relations);
        }
        assert!(has(&extract(&[turn("Ana", "We went to Osaka in May.")]), "Ana", "visited", "Osaka"));
    }

    #[test]
    fn lexical_patterns() {
        // the second clause shares the subject across an adverbial of up to three lowercase words
        let adv = extract(&[turn("Ana", "I moved to Lisbon last spring and work at Nimbus Labs as a designer.")]);
        assert!(has(&adv, "Ana", "works_at", "Nimbus Labs"), "{:?}", adv.relations);
        // an offer announced is the employer from then on
        let offer = extract(&[turn("Ana", "Big news: I finally got the offer from Volga Logic!")]);
        assert!(has(&offer, "Ana", "works_at", "Volga Logic"), "{:?}", offer.relations);
        // a word opening the sentence before a name the session knows is not part of it
        let later = extract(&[
            turn("Ana", "Marco Rossi called Dana Whitfield this morning."),
            turn("Ana", "Later Dana Whitfield texted Marco Rossi a photo."),
        ]);
        assert!(!later.entities.iter().any(|e| e.name.starts_with("Later")), "{:?}", later.entities);
        // a name in between ends the clause: Tom is not said to work at Acme
        let other = extract(&[turn("Ana", "Alex lives in Seattle with Tom and works at Acme.")]);
        assert!(!has(&other, "Tom", "works_at", "Acme") && !has(&other, "Seattle", "works_at", "Acme"), "{:?}", other.relations);
        let ex = extract(&[
            turn("user", "Alex works at Acme Robotics and lives in Seattle."),
            turn(
                "user",
                "Last week Alex moved to Portland. Alex's sister Yuna visited Busan.",
            ),
        ]);
        assert!(
            has(&ex, "Alex", "works_at", "Acme Robotics"),
            "{:?}",
            ex.relations
        );
        assert!(has(&ex, "Alex", "lives_in", "Seattle"));
        assert!(has(&ex, "Alex", "moved_to", "Portland"));
        assert!(has(&ex, "Yuna", "sister_of", "Alex"));
        assert!(has(&ex, "Yuna", "visited", "Busan"));
        let kind = |n: &str| {
            ex.entities
                .iter()
                .find(|e| e.name == n)
                .map(|e| e.kind.clone())
                .unwrap_or_default()
        };
        assert_eq!(kind("Acme Robotics"), "organization");
        assert_eq!(kind("Portland"), "place");
        assert_eq!(kind("Yuna"), "person");
        assert!(
            !ex.entities.iter().any(|e| e.name == "Last"),
            "{:?}",
            ex.entities
        );
        assert!(!ex.entities.iter().any(|e| e.name == "user"));
    }

    #[test]
    fn pronouns_never_resolve_to_places_organisations_or_ambiguous_sentences() {
        let ex = extract(&[turn(
            "Mina",
            "My brother Tom works at Google. He lives in Berlin.",
        )]);
        assert!(has(&ex, "Tom", "lives_in", "Berlin"), "{:?}", ex.relations);
        assert!(!ex
            .relations
            .iter()
            .any(|r| r.source == "Google" && r.predicate == "lives_in"));
        let ex = extract(&[turn("Mina", "Tom met Sara in London. She lives in Leeds.")]);
        assert!(
            !ex.relations.iter().any(|r| r.predicate == "lives_in"),
            "ambiguous: no fact rather than a wrong one: {:?}",
            ex.relations
        );
        let ex = extract(&[turn(
            "Mina",
            "My friend Jürgen works at Müller GmbH. He lives in München. Élodie visited Kraków.",
        )]);
        assert!(
            has(&ex, "Jürgen", "lives_in", "München"),
            "{:?}",
            ex.relations
        );
        assert!(
            has(&ex, "Élodie", "visited", "Kraków"),
            "non-ASCII capitals are names: {:?}",
            ex.relations
        );
    }

    #[test]
    fn restated_facts_are_dated_by_their_turn() {
        let at = |d: u32| {
            Some(chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2024, 1, d, 9, 0, 0).unwrap())
        };
        let turns = [
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Alex lives in Seattle.".into(),
                at: at(1),
            },
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Alex moved to Portland.".into(),
                at: at(5),
            },
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Oh wait, sorry. Alex lives in Seattle.".into(),
                at: at(6),
            },
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Yes, Alex lives in Seattle.".into(),
                at: at(7),
            },
        ];
        let ex = extract(&turns);
        let alex: Vec<(&str, Option<u32>)> = ex
            .relations
            .iter()
            .filter(|r| r.source == "Alex" && r.predicate != "mentioned_with")
            .map(|r| {
                (
                    r.target.as_str(),
                    r.valid_from.map(|t| chrono::Datelike::day(&t)),
                )
            })
            .collect();
        assert_eq!(
            alex,
            vec![
                ("Seattle", Some(1)),
                ("Portland", Some(5)),
                ("Seattle", Some(6))
            ],
            "the plain repeat on day 7 adds nothing"
        );
        let ex = extract(&[turn(
            "Caroline",
            "Woohoo Melanie! Wish I could come. Knowing I'm late, Fri works.",
        )]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["Caroline", "Melanie"],
            "interjections, \"I\" and weekdays are not names"
        );
        let shout = format!("{}.", "Alex ".repeat(50_000));
        assert!(
            extract(&[turn("Mina", &shout)])
                .entities
                .iter()
                .all(|e| e.name.len() < 100),
            "a capitalised flood is not a name"
        );
    }

    #[test]
    fn first_person_and_mentions_bind_to_a_named_speaker() {
        let ex = extract(&[turn(
            "Caroline",
            "I moved to Boston and I work at Acme Labs. I met Jon there.",
        )]);
        assert!(
            has(&ex, "Caroline", "moved_to", "Boston"),
            "{:?}",
            ex.relations
        );
        assert!(
            has(&ex, "Caroline", "mentions", "Jon"),
            "{:?}",
            ex.relations
        );
        let ex = extract(&[turn(
            "Mina",
            "Big news: I'm moving from Seattle to Portland at the end of the month.",
        )]);
        assert!(
            has(&ex, "Mina", "moved_to", "Portland"),
            "{:?}",
            ex.relations
        );
        let anon = extract(&[turn("user", "I moved to Boston.")]);
        assert!(
            !anon.relations.iter().any(|r| r.predicate == "moved_to"),
            "an unnamed speaker is not an entity"
        );
    }

    fn kind(ex: &Extraction, n: &str) -> Option<String> {
        ex.entities.iter().find(|e| e.name == n).map(|e| e.kind.clone())
    }

    #[test]
    fn sentence_starts_interjections_and_common_words_are_no_entities() {
        let ex = extract(&[
            turn("Caroline", "Painting's great for expressing myself. I love painting with Melanie."),
            turn("Melanie", "Sounds fun! Woah. Hopefully Jon comes too. Gotcha, Family is everything to my family."),
            turn("Caroline", "Remember Jon? It's Shia Labeouf's movie. I'm DOING fine. LGBTQ rights and Pride Month matter."),
            turn("Melanie", "My friend works as a Financial Analyst. I use VR at work."),
        ]);
        let names: Vec<&str> = ex.entities.iter().filter(|e| e.kind != "activity" && e.kind != "role").map(|e| e.name.as_str()).collect();
        for junk in ["Painting", "Sounds", "Woah", "Hopefully", "Gotcha", "Family", "Remember Jon", "It's Shia Labeouf", "DOING", "LGBTQ", "Pride Month", "Financial Analyst", "VR"] {
            assert!(!names.contains(&junk), "{junk} in {names:?}");
        }
        for real in ["Caroline", "Melanie", "Jon", "Shia Labeouf"] {
            assert!(names.contains(&real), "{real} missing from {names:?}");
        }
        assert!(has(&ex, "Caroline", "likes", "painting"), "{:?}", ex.relations);
    }

    #[test]
    fn name_particles_keep_a_name_whole() {
        let ex = extract(&[turn("Ana", "Congrats to Kevin van der Berg for winning. We met Ana de la Cruz and Ursula von der Leyen.")]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        for n in ["Kevin van der Berg", "Ana de la Cruz", "Ursula von der Leyen"] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(!names.contains(&"Berg") && !names.contains(&"Kevin"), "{names:?}");
    }

    #[test]
    fn a_capitalised_word_after_a_copula_is_no_name() {
        let ex = extract(&[turn("Ana", "Honestly I'm Tired today. I'm Vegan now, feeling so Blessed. I am Jordan's aunt and I feel Sarah is right.")]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        for junk in ["Tired", "Vegan", "Blessed"] {
            assert!(!names.contains(&junk), "{junk} in {names:?} {:?}", ex.relations);
        }
        assert!(names.contains(&"Sarah") && names.contains(&"Jordan"), "{names:?}");
    }

    #[test]
    fn a_name_after_in_or_at_is_no_pet_in_a_turn_about_pets() {
        let ex = extract(&[turn("Ana", "We hiked in the Alps with Bruno. My dog loves it there, and Bruno loves my dog.")]);
        assert_ne!(kind(&ex, "Alps").as_deref(), Some("pet"), "{:?}", ex.entities);
    }

    #[test]
    fn a_title_before_an_honorific_is_no_name_and_the_word_before_it_is() {
        let ex = extract(&[
            turn("민지", "김민수 팀장님이 칭찬해 주셨어. 우리 팀장님은 좋아. 부모님께 전화했어. 기념으로 강사님이 사진을 찍어 주셨어."),
            turn("Kenta", "田中部長さんと話した。お母さんも来た。"),
        ]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        for real in ["김민수", "田中"] {
            assert!(names.contains(&real), "{real} missing from {names:?}");
        }
        for title in ["팀장", "우리", "부모", "母", "田中部長", "部長", "기념으로", "강사"] {
            assert!(!names.contains(&title), "{title} in {names:?}");
        }
    }

    #[test]
    fn a_speaker_introducing_themself_is_one_node_with_the_name_as_alias() {
        let ex = extract(&[
            turn("u_4711", "Hi, I'm Nora Lindqvist. I work at Blue Harbor Labs."),
            turn("u_4711", "I'm Korean, and I'm Sam's mom. My name is Nora, by the way."),
            turn("assistant", "Nice to meet you, Nora! Say hi to Sam."),
            turn("u_4711", "Actually my full name is Nora Maria Lindqvist."),
        ]);
        let me = ex.entities.iter().find(|e| e.name == "u_4711").expect("the user's node");
        assert!(me.aliases.contains(&"Nora Lindqvist".to_string()) && me.aliases.contains(&"Nora".to_string()), "{me:?}");
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(!names.contains(&"Nora Lindqvist") && !names.contains(&"Korean") && names.contains(&"Sam"), "{names:?}");
        assert!(!names.contains(&"Nora") && !names.contains(&"Nora Maria Lindqvist"), "one node: {names:?}");
        assert!(has(&ex, "u_4711", "works_at", "Blue Harbor Labs"), "{:?}", ex.relations);
        assert!(ex.relations.iter().all(|r| r.source != "Nora Lindqvist" && r.target != "Nora Lindqvist"), "{:?}", ex.relations);
        // in lowercase chat: a given name alone, never a state or a phrase
        let low = extract(&[
            turn("u_9", "hi i'm nora! just moved here. i'm tired tbh"),
            turn("u_9", "lol call me maybe. my name is nora btw"),
        ]);
        let me = low.entities.iter().find(|e| e.name == "u_9").expect("the user's node");
        assert_eq!(me.aliases, ["Nora"], "{me:?}");
        let names: Vec<&str> = low.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(!names.iter().any(|n| n.eq_ignore_ascii_case("tired") || n.eq_ignore_ascii_case("maybe") || *n == "Nora"), "{names:?}");
    }

    #[test]
    fn calendar_forms_opening_marks_and_half_phrases_are_no_entities() {
        let hola = extract(&[turn("Ana", "¡Hola Lucía! ¿Qué tal tu semana? Hallo Petra.")]);
        let names: Vec<&str> = hola.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(names.contains(&"Lucía") && names.contains(&"Petra") && !names.iter().any(|n| n.contains("Hola") || n.contains("Hallo")), "{names:?}");
        let ex = extract(&[
            turn("Ana", "¡Genial! ¿Sabes qué? I go swimming on Saturdays with Lucía."),
            turn("Eleni", "Το Σάββατο θα πάω στην Κρήτη με τη Μαρία. Τον Αύγουστο έχω διακοπές, από 3 Μαΐου."),
            turn("Jonas", "Am Montag fahre ich mit Petra nach Wien."),
        ]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        for junk in ["Genial", "Sabes", "Saturdays", "Το Σάββατο", "Σάββατο", "Τον Αύγουστο", "Αύγουστο", "Μαΐου", "Montag", "Am Montag"] {
            assert!(!names.contains(&junk), "{junk} in {names:?}");
        }
        for real in ["Lucía", "Κρήτη", "Μαρία", "Petra", "Wien"] {
            assert!(names.contains(&real), "{real} missing from {names:?}");
        }
        let ex = extract(&[
            turn("Sam", "My boss Linda is planning a trip to Tokyo. Emma and her husband Carlos want to visit Japan."),
            turn("Sam", "I like action and comedy movies. I love curling up on the couch. Can't wait to visit Lisbon!"),
        ]);
        assert!(!has(&ex, "Sam", "plans_to_visit", "Tokyo") && !has(&ex, "Sam", "plans_to_visit", "Japan"), "{:?}", ex.relations);
        assert!(has(&ex, "Sam", "plans_to_visit", "Lisbon"), "an implied I plans: {:?}", ex.relations);
        let went = extract(&[turn("Sam", "Sara and Mikael went to Malmö last week. I went to Oslo.")]);
        assert!(!has(&went, "Sam", "visited", "Malmö") && has(&went, "Sam", "visited", "Oslo"), "{:?}", went.relations);
        let liked: Vec<&str> = ex.relations.iter().filter(|r| r.predicate == "likes").map(|r| r.target.as_str()).collect();
        assert_eq!(liked, ["action movies", "comedy movies"], "the head belongs to both conjuncts; a phrasal verb is no liked thing");
        let lists = extract(&[turn("Sam", "I like action, sci-fi and horror movies. I enjoy hiking, swimming and cycling. I love jazz and classical music. I love hiking with friends and dogs. I love kayaking, skiing, and climbing.")]);
        let liked: Vec<&str> = lists.relations.iter().filter(|r| r.predicate == "likes").map(|r| r.target.as_str()).collect();
        let want = ["action movies", "sci-fi movies", "horror movies", "hiking", "swimming", "cycling", "jazz"];
        assert_eq!(liked, [&want[..], &["kayaking", "skiing", "climbing"]].concat(), "the serial comma keeps the last item: {liked:?}");
        assert!(third_person_subject("My boss Linda is") && third_person_subject("so she's") && !third_person_subject("Honestly I") && !third_person_subject("Mom and I"));
        assert!(third_person_subject("My sister") && third_person_subject("My parents are") && third_person_subject("Linda's been") && third_person_subject("Emma"));
        assert!(!third_person_subject("Honestly, we") && !third_person_subject("Really"));
        assert!(!third_person_subject("Last weekend, I took my family on a road") && !third_person_subject("It's from our"));
    }

    #[test]
    fn cues_type_entities_and_give_typed_relations() {
        let ex = extract(&[
            turn("Melanie", "My dog Oliver loves the park. We also have a cat named Luna."),
            turn("Caroline", "I'm a school counselor now. I play the violin and I went to Sweden last year."),
            turn("Melanie", "I just read the book Becoming Nicole. I joined the Riverside Running Club. We camped at the Grand Canyon."),
        ]);
        assert_eq!(kind(&ex, "Oliver").as_deref(), Some("pet"));
        assert_eq!(kind(&ex, "Luna").as_deref(), Some("pet"));
        assert!(has(&ex, "Melanie", "owns_pet", "Oliver"), "{:?}", ex.relations);
        assert!(has(&ex, "Caroline", "works_as", "school counselor"), "{:?}", ex.relations);
        assert!(has(&ex, "Caroline", "plays", "violin"));
        assert!(has(&ex, "Caroline", "visited", "Sweden"));
        assert_eq!(kind(&ex, "Sweden").as_deref(), Some("place"));
        assert_eq!(kind(&ex, "Becoming Nicole").as_deref(), Some("work"));
        assert!(has(&ex, "Melanie", "member_of", "Riverside Running Club"));
        assert_eq!(kind(&ex, "Riverside Running Club").as_deref(), Some("organization"));
        assert_eq!(kind(&ex, "Grand Canyon").as_deref(), Some("place"));
    }

    #[test]
    fn korean_japanese_and_vietnamese_honorifics_mark_persons() {
        let ex = extract(&[
            turn("민지", "어제 지훈님이랑 점심 먹었어요. 수진 씨도 왔어요."),
            turn("Aiko", "昨日、田中さんと会いました。ユキちゃんも来ました。"),
            turn("Lan", "Hôm qua tôi gặp anh Minh ở Hà Nội."),
        ]);
        for (n, k) in [("지훈", "person"), ("수진", "person"), ("田中", "person"), ("ユキ", "person"), ("Minh", "person")] {
            assert_eq!(kind(&ex, n).as_deref(), Some(k), "{n}: {:?}", ex.entities);
        }
        assert!(!ex.entities.iter().any(|e| e.name.contains("님") || e.name.contains("さん")), "{:?}", ex.entities);
    }

    #[test]
    fn names_sharing_a_sentence_are_mentioned_with_each_other() {
        let ex = extract(&[turn(
            "Caroline",
            "I went hiking with Melanie and Jon near Mount Rainier.",
        )]);
        assert!(ex
            .entities
            .iter()
            .any(|e| e.name == "Caroline" && e.kind == "person"));
        assert!(
            has(&ex, "Melanie", "mentioned_with", "Jon"),
            "{:?}",
            ex.relations
        );
        assert!(
            has(&ex, "Melanie", "mentioned_with", "Mount Rainier")
                || has(&ex, "Jon", "mentioned_with", "Mount Rainier")
        );
    }

    #[test]
    fn likes_favourites_and_fandom_bind_to_the_speaker() {
        let ex = extract(&[
            turn("Mel", "I love camping trips with my fam. I'm a big fan of pottery."),
            turn("Dave", "I'm obsessed with classic cars. Ratatouille is one of my favorites! As a Manchester City fan, I disagree."),
            turn("Cara", "I loved \"Becoming Nicole\" by Amy Ellis Nutt. Books feed my love of reading."),
            turn("Jo", "I love making it. I love that. I love spending time with friends."),
        ]);
        for (s, o) in [("Mel", "camping trips"), ("Mel", "pottery"), ("Dave", "classic cars"), ("Dave", "Ratatouille"), ("Dave", "Manchester City"), ("Cara", "Becoming Nicole"), ("Cara", "reading")] {
            assert!(has(&ex, s, "likes", o), "{s} likes {o}: {:?}", ex.relations);
        }
        assert!(has(&ex, "Amy Ellis Nutt", "created", "Becoming Nicole"), "{:?}", ex.relations);
        assert_eq!(kind(&ex, "Becoming Nicole").as_deref(), Some("work"));
        assert_eq!(kind(&ex, "Manchester City").as_deref(), Some("organization"));
        // verbs with objects, pronouns and "spending time" are no hobbies
        assert!(!ex.relations.iter().any(|r| r.source == "Jo" && r.predicate == "likes"), "{:?}", ex.relations);
    }

    #[test]
    fn events_groups_makings_sports_and_games() {
        let ex = extract(&[
            turn("Caroline", "Last week I went to an LGBTQ+ pride parade. I just signed up for a pottery class."),
            turn("Dave", "I got to go to a car workshop in San Francisco! I recently joined a rock band."),
            turn("John", "I'm doing kickboxing now. We played Fortnite and Overwatch. I'm playing \"The Witcher 3\"! I made an application for them."),
            turn("Mel", "Here's a photo of my horse painting I did recently."),
        ]);
        for (s, p, o) in [
            ("Caroline", "attended", "lgbtq+ pride parade"),
            ("Caroline", "attended", "pottery class"),
            ("Dave", "attended", "car workshop"),
            ("Dave", "visited", "San Francisco"),
            ("Dave", "member_of", "rock band"),
            ("John", "plays", "kickboxing"),
            ("John", "plays", "Fortnite"),
            ("John", "plays", "The Witcher 3"),
            ("John", "created", "application"),
            ("Mel", "created", "horse painting"),
        ] {
            assert!(has(&ex, s, p, o), "{s} {p} {o}: {:?}", ex.relations);
        }
        assert_eq!(kind(&ex, "Fortnite").as_deref(), Some("work"));
    }

    #[test]
    fn a_short_word_opening_a_sentence_is_no_part_of_the_name() {
        let ex = extract(&[turn(
            "Дима",
            "В Казани было холодно. Мы жили в центре, на даче у друзей. На Байкале тоже. Al Pacino was great.",
        )]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(names.contains(&"Казани") && names.contains(&"Байкале"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("В ") || n.starts_with("На ")), "{names:?}");
        assert!(names.contains(&"Al Pacino"), "'al' is never written lowercase here: {names:?}");
    }

    #[test]
    fn pets_plans_and_friendship() {
        let ex = extract(&[
            turn("Caroline", "Yup, Oscar, my guinea pig. He's great."),
            turn("Melanie", "We got another cat named Bailey too."),
            turn("Maria", "I got a puppy two weeks ago! Her name's Coco and she's adorable."),
            turn("Calvin", "I'm going to Tokyo next month. I went to Boston last year."),
        ]);
        assert!(has(&ex, "Caroline", "owns_pet", "Oscar"), "{:?}", ex.relations);
        assert!(has(&ex, "Melanie", "owns_pet", "Bailey"), "{:?}", ex.relations);
        assert!(has(&ex, "Maria", "owns_pet", "Coco"), "{:?}", ex.relations);
        // any one or two adjectives before the animal, not a list of them
        let grey = extract(&[turn("Ana", "We adopted a grey cat called Miso and my big black-and-white dog Rex hates her.")]);
        assert!(has(&grey, "Ana", "owns_pet", "Miso") && has(&grey, "Ana", "owns_pet", "Rex"), "{:?}", grey.relations);
        assert!(has(&ex, "Calvin", "plans_to_visit", "Tokyo"), "{:?}", ex.relations);
        assert!(!has(&ex, "Calvin", "visited", "Tokyo"), "{:?}", ex.relations);
        assert!(has(&ex, "Calvin", "visited", "Boston"), "{:?}", ex.relations);
        let two = extract(&[turn("John", "Thanks for being an awesome friend, Maria."), turn("Maria", "Anytime!")]);
        assert!(has(&two, "John", "friend_of", "Maria"), "{:?}", two.relations);
        let friends = extract(&[turn("James", "We visited my friends Josh and Mark.")]);
        assert!(has(&friends, "James", "friend_of", "Josh") && has(&friends, "James", "friend_of", "Mark"), "{:?}", friends.relations);
    }

    #[test]
    fn untyped_names_are_typed_by_context_and_short_forms_fold_into_persons() {
        let ex = extract(&[
            turn("Melanie", "Both Luna and Oliver are so playful, the cats love the garden."),
            turn("Caroline", "Thanks, Mel! I met Matt Patterson and Laura at the talk."),
            turn("John", "I bought the new game from Nintendo. Have you read Name of the Wind? Civilization VI is out."),
        ]);
        for (n, k) in [
            ("Luna", "pet"),
            ("Oliver", "pet"),
            ("Matt Patterson", "person"),
            ("Laura", "person"),
            ("Nintendo", "organization"),
            ("Name of the Wind", "work"),
            ("Civilization VI", "work"),
        ] {
            assert_eq!(kind(&ex, n).as_deref(), Some(k), "{n}: {:?}", ex.entities);
        }
        // "Mel" is Melanie's short form: an alias, not an entity of its own
        assert!(kind(&ex, "Mel").is_none(), "{:?}", ex.entities);
        let melanie = ex.entities.iter().find(|e| e.name == "Melanie").expect("Melanie");
        assert!(melanie.aliases.contains(&"Mel".to_string()), "{:?}", melanie);
    }
}
