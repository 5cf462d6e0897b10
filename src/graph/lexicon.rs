//! Word lists of the offline extractor ([`super::extract`]), written for it:
//! words that are capitalised at a sentence start but are no names, words
//! that make a capitalised span a role or an identity rather than an entity,
//! and the cues that type an entity (place gazetteer, name suffixes, pet and
//! title words). Lowercase; matched against lowercased words.

/// Words that open sentences (interjections, discourse words, imperatives,
/// contractions): never a one-word name, and stripped from the front of a span.
pub const OPENERS: &[&str] = &[
    "hey", "hi", "hello", "hiya", "yo", "bye", "goodbye", "thanks", "thank", "thx", "ty", "yeah", "yep", "yup",
    "yes", "no", "nope", "nah", "oh", "ooh", "ah", "aw", "aww", "awww", "wow", "woah", "whoa", "woo", "woohoo",
    "yay", "omg", "lol", "haha", "hahaha", "hehe", "ha", "hmm", "um", "uh", "ugh", "oops", "ouch", "phew",
    "sounds", "hopefully", "gotcha", "sure", "okay", "ok", "alright", "great", "awesome", "cool", "nice",
    "lovely", "amazing", "wonderful", "fantastic", "congrats", "congratulations", "sorry", "totally",
    "absolutely", "definitely", "exactly", "indeed", "anyway", "anyways", "btw", "also", "well", "so", "and",
    "but", "or", "if", "when", "what", "who", "how", "why", "where", "which", "whatever", "let's", "lets",
    "it's", "its", "that's", "thats", "here's", "heres", "there's", "theres", "you're", "youre", "we're",
    "they're", "i'm", "im", "i've", "i'd", "i'll", "don't", "dont", "can't", "cant", "won't", "didn't",
    "doesn't", "isn't", "wasn't", "aren't", "haven't", "hasn't", "couldn't", "wouldn't", "shouldn't", "what's",
    "who's", "how's", "remember", "guess", "look", "check", "see", "thinking", "speaking", "talking", "having",
    "being", "doing", "going", "getting", "seeing", "knowing", "glad", "happy", "good", "bad", "best", "hope",
    "wish", "love", "loved", "like", "liked", "enjoy", "take", "keep", "let", "make", "tell", "try", "thinks",
    "think", "maybe", "perhaps", "probably", "actually", "really", "honestly", "seriously", "literally",
    "basically", "luckily", "unfortunately", "fortunately", "sadly", "thankfully", "recently", "lately",
    "finally", "anyhow", "besides", "plus", "still", "just", "even", "now", "then", "today", "tonight",
    "tomorrow", "yesterday", "last", "next", "this", "that", "these", "those", "some", "any", "all", "every",
    "each", "both", "either", "neither", "many", "much", "more", "most", "few", "lots", "cheers", "welcome",
    "please", "wait", "hang", "stay", "enjoyed", "sending", "seems", "looks", "feels", "wishing", "hoping",
    "agreed", "true", "right", "same", "gonna", "wanna", "gotta", "aha", "bravo", "dude", "man", "girl",
    "buddy", "pal", "bro", "sis", "wanted", "means", "meant", "sweet", "damn", "gosh", "jeez", "yikes", "geez",
    "hooray", "ahh", "oof", "meh", "mhm", "uhh", "umm", "wooo", "noted", "morning", "afternoon", "evening",
    "night", "merry", "lovin'", "always", "never", "sometimes", "often", "usually", "sports",
];

/// Job titles: a span ending in one is a role (a `works_as` value), not an entity.
pub const ROLES: &[&str] = &[
    "analyst", "engineer", "developer", "programmer", "designer", "manager", "director", "teacher", "nurse",
    "doctor", "physician", "surgeon", "dentist", "lawyer", "attorney", "accountant", "consultant", "counselor",
    "counsellor", "therapist", "psychologist", "scientist", "researcher", "professor", "student", "intern",
    "architect", "artist", "painter", "musician", "singer", "writer", "author", "journalist", "editor",
    "photographer", "chef", "cook", "baker", "barista", "waiter", "waitress", "pilot", "driver", "mechanic",
    "electrician", "plumber", "carpenter", "firefighter", "officer", "soldier", "veteran", "coach", "trainer",
    "instructor", "assistant", "secretary", "clerk", "cashier", "salesperson", "entrepreneur", "founder", "ceo",
    "cto", "cfo", "owner", "volunteer", "activist", "advocate", "pharmacist", "veterinarian", "vet", "librarian",
    "specialist", "technician", "administrator", "coordinator", "supervisor", "executive", "president",
    "streamer", "gamer", "dancer", "actor", "actress", "producer", "rapper", "dj", "model", "influencer",
    "blogger", "youtuber", "tutor", "mentor", "realtor", "agent", "banker", "economist", "statistician",
];

/// Nationalities, languages, religions, identities and other words that are
/// capitalised in English but name no entity of the graph.
pub const IDENTITIES: &[&str] = &[
    "lgbtq", "lgbtq+", "lgbt", "trans", "transgender", "queer", "gay", "lesbian", "bisexual", "nonbinary",
    "christian", "christians", "muslim", "jewish", "buddhist", "hindu", "catholic", "atheist", "american",
    "americans", "british", "english", "french", "german", "spanish", "italian", "chinese", "japanese",
    "korean", "vietnamese", "indian", "mexican", "canadian", "australian", "irish", "scottish", "swedish",
    "dutch", "russian", "brazilian", "african", "asian", "european", "latino", "latina", "hispanic", "arabic",
    "portuguese", "greek", "turkish", "thai", "polish", "ukrainian", "filipino", "norwegian", "danish",
    "finnish", "swiss", "austrian", "belgian", "persian", "egyptian", "nigerian", "kenyan", "christmas",
    "easter", "thanksgiving", "halloween", "hanukkah", "diwali", "ramadan", "eid", "valentine", "valentine's",
    "new", "year", "years", "pride", "month", "internet", "wifi", "tv", "ai", "god", "bible", "mom", "dad",
    "grandma", "grandpa", "mum", "mommy", "daddy", "ok", "ps", "asap", "diy", "fyi", "imo", "tbh", "btw", "covid",
    "python", "java", "javascript", "typescript", "html", "css", "sql", "c++", "c#", "php", "hawaiian", "zen",
    "bon", "appetit", "voyage",
];

/// Countries, regions, states and big cities (a gazetteer for `place`).
pub const PLACES: &[&str] = &[
    "afghanistan", "albania", "algeria", "argentina", "armenia", "australia", "austria", "bahamas", "bangladesh",
    "belgium", "bolivia", "brazil", "bulgaria", "cambodia", "cameroon", "canada", "chile", "china", "colombia",
    "costa rica", "croatia", "cuba", "cyprus", "czechia", "czech republic", "denmark", "ecuador", "egypt",
    "england", "estonia", "ethiopia", "fiji", "finland", "france", "germany", "ghana", "greece", "greenland",
    "guatemala", "haiti", "honduras", "hungary", "iceland", "india", "indonesia", "iran", "iraq", "ireland",
    "israel", "italy", "jamaica", "japan", "kazakhstan", "kenya", "korea", "south korea", "kuwait",
    "laos", "latvia", "lebanon", "lithuania", "luxembourg", "madagascar", "malaysia", "maldives", "mali",
    "malta", "mexico", "mongolia", "morocco", "nepal", "netherlands", "new zealand", "nicaragua", "nigeria",
    "norway", "pakistan", "panama", "paraguay", "peru", "philippines", "poland", "portugal", "qatar",
    "romania", "russia", "rwanda", "saudi arabia", "scotland", "senegal", "serbia", "singapore", "slovakia",
    "slovenia", "somalia", "south africa", "spain", "sri lanka", "sudan", "sweden", "switzerland", "syria",
    "taiwan", "tanzania", "thailand", "tunisia", "turkey", "uganda", "ukraine", "united kingdom", "uk",
    "united states", "usa", "us", "uruguay", "uzbekistan", "venezuela", "vietnam", "wales", "yemen", "zambia",
    "zimbabwe", "europe", "asia", "africa", "antarctica", "north america", "south america", "caribbean",
    "scandinavia", "middle east", "pacific northwest", "east coast", "west coast", "midwest", "alabama",
    "alaska", "arizona", "arkansas", "california", "colorado", "connecticut", "delaware", "florida", "georgia",
    "hawaii", "idaho", "illinois", "indiana", "iowa", "kansas", "kentucky", "louisiana", "maine", "maryland",
    "massachusetts", "michigan", "minnesota", "mississippi", "missouri", "montana", "nebraska", "nevada",
    "new hampshire", "new jersey", "new mexico", "new york", "north carolina", "north dakota", "ohio",
    "oklahoma", "oregon", "pennsylvania", "rhode island", "south carolina", "south dakota", "tennessee",
    "texas", "utah", "vermont", "virginia", "washington", "west virginia", "wisconsin", "wyoming", "ontario",
    "quebec", "british columbia", "alberta", "bavaria", "tuscany", "provence", "bali", "hokkaido", "okinawa",
    "london", "paris", "berlin", "madrid", "rome", "milan", "venice", "florence", "barcelona", "lisbon",
    "amsterdam", "brussels", "vienna", "prague", "budapest", "warsaw", "kraków", "krakow", "munich",
    "münchen", "hamburg", "zurich", "geneva", "stockholm", "oslo", "copenhagen", "helsinki", "dublin",
    "edinburgh", "manchester", "liverpool", "athens", "istanbul", "moscow", "kyiv", "dubai", "cairo",
    "nairobi", "cape town", "lagos", "tokyo", "kyoto", "osaka", "seoul", "busan", "beijing", "shanghai",
    "hong kong", "taipei", "bangkok", "hanoi", "ho chi minh city", "saigon", "singapore", "jakarta", "manila",
    "mumbai", "delhi", "new delhi", "bangalore", "sydney", "melbourne", "brisbane", "perth", "auckland",
    "toronto", "vancouver", "montreal", "ottawa", "calgary", "new york city", "nyc", "los angeles", "la",
    "san francisco", "san diego", "san jose", "seattle", "portland", "boston", "chicago", "houston",
    "dallas", "austin", "miami", "orlando", "atlanta", "denver", "phoenix", "las vegas", "detroit",
    "philadelphia", "pittsburgh", "nashville", "new orleans", "minneapolis", "salt lake city", "honolulu",
    "anchorage", "mexico city", "cancun", "havana", "lima", "bogota", "buenos aires", "rio de janeiro",
    "sao paulo", "santiago", "nuuk", "reykjavik", "stamford", "brooklyn", "manhattan", "hollywood",
    "silicon valley", "shibuya", "shinjuku", "times square", "grand canyon", "yosemite", "yellowstone",
];

/// Last words that make a span a place.
pub const PLACE_SUFFIXES: &[&str] = &[
    "park", "lake", "canyon", "beach", "mountain", "mountains", "mount", "mt", "river", "island", "islands",
    "street", "st", "avenue", "ave", "road", "city", "county", "falls", "valley", "bay", "coast", "forest",
    "desert", "hills", "hill", "peninsula", "square", "garden", "gardens", "museum", "zoo", "trail", "harbor",
    "harbour", "pier", "plaza", "reservoir", "springs", "national park", "cafe", "café", "restaurant", "bar",
    "pub", "diner", "stadium", "arena",
];

/// Last words that make a span an organization.
pub const ORG_SUFFIXES: &[&str] = &[
    "inc", "inc.", "corp", "corp.", "corporation", "llc", "ltd", "ltd.", "gmbh", "co", "co.", "company",
    "university", "college", "school", "academy", "institute", "club", "foundation", "association", "society",
    "church", "shelter", "center", "centre", "hospital", "clinic", "bank", "group", "team", "agency",
    "studio", "studios", "labs", "lab", "robotics", "technologies", "systems", "network", "council",
    "committee", "union", "league", "band", "orchestra", "choir", "ministry", "department", "firm", "partners",
    "activists", "alliance", "coalition", "federation", "organization", "organisation", "charity", "fund",
];

/// Last words that make a span an event.
pub const EVENT_SUFFIXES: &[&str] = &[
    "festival", "fest", "conference", "con", "parade", "marathon", "concert", "fair", "summit", "expo",
    "olympics", "cup", "championship", "championships", "tournament", "gala", "shower", "convention",
    "retreat", "hackathon", "race", "run", "walk", "ceremony", "carnival", "jam",
];

/// Words for pets: "my dog Max", "a cat named Luna".
pub const PETS: &str = "dog|dogs|cat|cats|puppy|pup|kitten|kitty|pet|bunny|rabbit|hamster|parrot|bird|horse|pony|guinea pig|turtle|tortoise|fish|goldfish|snake|lizard|ferret|gecko|chinchilla|hedgehog|rescue dog|rescue|shepherd|labrador|lab|retriever|poodle|beagle|husky|corgi|pug|terrier|bulldog|dachshund|chihuahua|spaniel|collie|boxer|doberman|rottweiler|pit bull|tabby";

/// Words before a title: "read The Hobbit", "the book Becoming Nicole".
pub const WORK_CUES: &str = "book|novel|movie|film|show|series|song|album|game|video game|play|painting|poem|podcast|documentary|musical";

/// Honorifics before a person's name (English; CJK ones follow the name and are matched apart).
pub const HONORIFICS: &[&str] = &["mr", "mrs", "ms", "miss", "dr", "prof", "professor", "sir", "madam", "aunt", "uncle", "grandma", "grandpa", "coach"];

/// Instruments and sports for `plays`.
pub const PLAYABLE: &[&str] = &[
    "piano", "guitar", "violin", "cello", "drums", "bass", "flute", "clarinet", "saxophone", "trumpet",
    "ukulele", "harp", "keyboard", "banjo", "accordion", "soccer", "football", "basketball", "baseball",
    "tennis", "golf", "volleyball", "hockey", "chess", "cricket", "rugby", "badminton", "softball",
    "table tennis", "ping pong", "poker", "board games", "video games", "games",
];

/// True when `w` (lowercase) is in `list`.
pub fn contains(list: &[&str], w: &str) -> bool {
    list.contains(&w)
}
