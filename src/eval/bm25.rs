//! Reference baseline "BM25 over raw text, no memory system".
//!
//! BM25Okapi as in Robertson & Zaragoza, "The Probabilistic Relevance
//! Framework: BM25 and Beyond" (2009), with the parameters of rank_bm25's
//! `BM25Okapi` (k1 = 1.5, b = 0.75). For a query `q` and document `d`:
//!
//! ```text
//! score(q, d) = Σ_{t in q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))
//! idf(t)      = ln((N − df(t) + 0.5) / (df(t) + 0.5) + 1)
//! ```
//!
//! The idf is the non-negative "+1" form (as in Lucene), so no epsilon floor
//! is needed. Query tokens are summed with repetition, as rank_bm25's
//! `get_scores` does. Tokens: lowercase `[a-z0-9]+` runs, minus a small
//! English stop words (`src/text/lexicon/en.toml`, the keyword analyzer's), no stemming ([`tokenize`]).

use std::collections::HashMap;

/// Lowercases `text` and returns its `[a-z0-9]+` runs, minus the English
/// stop words ([`crate::store::analyzer::stop_words`]).
/// Characters outside ASCII letters and digits (after lowercasing) separate
/// tokens.
pub fn tokenize(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty() && !crate::store::analyzer::stop_words().contains(t))
        .map(str::to_string)
        .collect()
}

/// In-memory BM25Okapi index over documents identified by usize.
#[derive(Debug, Clone)]
pub struct Bm25Index {
    k1: f32,
    b: f32,
    /// Caller id and token length of each document, by internal position.
    docs: Vec<(usize, usize)>,
    total_len: usize,
    /// term -> (internal position, term frequency)
    postings: HashMap<String, Vec<(usize, u32)>>,
    /// Documents and queries go through it ([`tokenize`] unless set with
    /// [`Bm25Index::with_tokenizer`]).
    tokenizer: fn(&str) -> Vec<String>,
}

impl Bm25Index {
    /// Empty index with the given parameters (the reference uses `k1 = 1.5`,
    /// `b = 0.75`).
    pub fn new(k1: f32, b: f32) -> Self {
        Self {
            k1,
            b,
            docs: Vec::new(),
            total_len: 0,
            postings: HashMap::new(),
            tokenizer: tokenize,
        }
    }

    /// The same index analysing text with `tokenizer` instead of
    /// [`tokenize`] (ASCII only): `strata eval multilingual` gives its BM25
    /// baseline Strata's keyword analyzer, so CJK and Thai get bigrams there too.
    pub fn with_tokenizer(mut self, tokenizer: fn(&str) -> Vec<String>) -> Self {
        self.tokenizer = tokenizer;
        self
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no document has been added.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Indexes `text` as document `id`. Ids should be unique; if one is added
    /// twice the texts count as two documents and [`Bm25Index::search`]
    /// reports the id once, with its best score.
    pub fn add(&mut self, id: usize, text: &str) {
        let pos = self.docs.len();
        let tokens = (self.tokenizer)(text);
        let mut tf: HashMap<String, u32> = HashMap::new();
        for t in &tokens {
            *tf.entry(t.clone()).or_insert(0) += 1;
        }
        for (term, n) in tf {
            self.postings.entry(term).or_default().push((pos, n));
        }
        self.docs.push((id, tokens.len()));
        self.total_len += tokens.len();
    }

    /// The `top_k` best documents for `query` as `(id, score)`, sorted by
    /// score descending then id ascending; only scores > 0 are returned.
    pub fn search(&self, query: &str, top_k: usize) -> Vec<(usize, f32)> {
        if self.docs.is_empty() || top_k == 0 {
            return Vec::new();
        }
        let n = self.docs.len() as f64;
        let avgdl = (self.total_len as f64 / n).max(f64::MIN_POSITIVE);
        let (k1, b) = (self.k1 as f64, self.b as f64);
        let mut scores = vec![0.0f64; self.docs.len()];
        for term in (self.tokenizer)(query) {
            let Some(list) = self.postings.get(&term) else {
                continue;
            };
            let df = list.len() as f64;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(pos, tf) in list {
                let tf = tf as f64;
                let dl = self.docs[pos].1 as f64;
                scores[pos] += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl));
            }
        }
        let mut best: HashMap<usize, f32> = HashMap::new();
        for (pos, s) in scores.into_iter().enumerate() {
            let s = s as f32;
            if s > 0.0 {
                let e = best.entry(self.docs[pos].0).or_insert(s);
                if s > *e {
                    *e = s;
                }
            }
        }
        let mut out: Vec<(usize, f32)> = best.into_iter().collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out.truncate(top_k);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizes_lowercase_alnum_without_stop_words() {
        assert_eq!(
            tokenize("When did the cat's 2 BIG dogs -- and I, café-owner!"),
            vec!["cat", "2", "big", "dogs", "caf", "owner"]
        );
        assert!(tokenize("  ... the a an  ").is_empty());
    }

    #[test]
    fn matches_hand_computed_score() {
        let mut ix = Bm25Index::new(1.5, 0.75);
        ix.add(10, "apple banana");
        ix.add(20, "banana cherry cherry");
        ix.add(30, "durian");
        // N=3, avgdl=6/3=2. "cherry": df=1, tf=2 in doc 20 (len 3).
        let idf = ((3.0f64 - 1.0 + 0.5) / (1.0 + 0.5) + 1.0).ln();
        let expect = idf * 2.0 * 2.5 / (2.0 + 1.5 * (0.25 + 0.75 * 3.0 / 2.0));
        let r = ix.search("cherry", 5);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, 20);
        assert!((r[0].1 as f64 - expect).abs() < 1e-5);
    }

    #[test]
    fn ranks_desc_ties_by_id_and_drops_zero() {
        let mut ix = Bm25Index::new(1.5, 0.75);
        ix.add(7, "red fox");
        ix.add(3, "red fox");
        ix.add(5, "blue whale swims far away");
        ix.add(1, "red");
        let r = ix.search("the red fox", 10);
        let ids: Vec<usize> = r.iter().map(|x| x.0).collect();
        assert_eq!(ids, vec![3, 7, 1]); // 3 and 7 tie, whale scores 0
        assert!(r.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(ix.search("red fox", 1).len(), 1);
        assert!(ix.search("nothing matches", 10).is_empty());
        assert!(Bm25Index::new(1.5, 0.75).search("red", 3).is_empty());
    }

    #[test]
    fn duplicate_id_reported_once() {
        let mut ix = Bm25Index::new(1.5, 0.75);
        ix.add(1, "alpha beta");
        ix.add(1, "alpha");
        ix.add(2, "gamma");
        let r = ix.search("alpha", 10);
        assert_eq!(r.len(), 1);
        assert_eq!(ix.len(), 3);
    }
}
