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
    "table tennis", "ping pong", "poker", "board games", "video games",
];

/// True when `w` (lowercase) is in `list`.
pub fn contains(list: &[&str], w: &str) -> bool {
    list.contains(&w)
}

/// Common given names (English-speaking countries first, then frequent names
/// of other languages written in Latin letters): a span whose first word is
/// one is typed `person` when no pattern and no context typed it otherwise.
/// Written for Strata from general knowledge; deliberately short of names
/// that are also common words ("Will", "May", "Art" are left out).
pub const GIVEN_NAMES: &[&str] = &[
    "aaron", "abby", "abigail", "adam", "adrian", "aisha", "alan", "albert", "alex", "alexander", "alexis",
    "alice", "alicia", "alison", "amanda", "amber", "amelia", "amy", "ana", "andrea", "andrew", "andy",
    "angela", "anna", "anne", "anthony", "antonio", "ashley", "audrey", "ava", "barbara", "ben", "benjamin",
    "beth", "betty", "bill", "bob", "brad", "brandon", "brenda", "brian", "brittany", "bruce", "bryan",
    "caleb", "calvin", "cameron", "carl", "carla", "carlos", "carol", "caroline", "carolyn", "catherine",
    "charles", "charlotte", "chloe", "chris", "christian", "christina", "christine", "christopher",
    "cindy", "claire", "clara", "cody", "colin", "connor", "craig", "cynthia", "daniel", "danielle", "dave",
    "david", "deborah", "debra", "dennis", "derek", "diana", "diane", "dominic", "donald", "donna", "doris",
    "dylan", "ed", "eddie", "edward", "elena", "eli", "elijah", "elizabeth", "ella", "ellen", "emily", "emma",
    "eric", "erin", "ethan", "eva", "evan", "evelyn", "fatima", "felix", "fiona", "frances", "frank", "fred",
    "gabriel", "gabriela", "gary", "george", "gina", "grace", "greg", "gregory", "hannah", "harold", "harry",
    "heather", "helen", "henry", "ian", "isaac", "isabel", "isabella", "jack", "jackson", "jacob", "jake",
    "james", "jamie", "jane", "janet", "jasmine", "jason", "jean", "jeff", "jeffrey", "jennifer", "jenny",
    "jeremy", "jerry", "jess", "jessica", "jill", "jim", "jimmy", "joan", "joanna", "joe", "joel", "john",
    "jon", "jonathan", "jordan", "jose", "joseph", "josh", "joshua", "joyce", "juan", "judy", "julia",
    "julian", "julie", "justin", "karen", "kate", "katherine", "kathleen", "katie", "keith", "kelly", "ken",
    "kevin", "kim", "kyle", "larry", "laura", "lauren", "leah", "leo", "liam", "linda", "lisa", "logan",
    "lucas", "lucy", "luis", "luke", "lydia", "maria", "marie", "mark", "martin", "mary", "mason", "matt",
    "matthew", "megan", "melanie", "melissa", "michael", "michelle", "mike", "mila", "mohammed", "muhammad",
    "nancy", "natalie", "nathan", "nicholas", "nick", "nicole", "noah", "nora", "olivia", "omar", "owen",
    "pam", "pamela", "patricia", "patrick", "paul", "paula", "peter", "philip", "priya", "rachel", "rahul",
    "ralph", "raj", "rebecca", "richard", "rick", "robert", "roger", "ron", "ronald", "rose", "ruth", "ryan",
    "sam", "samantha", "samuel", "sandra", "sara", "sarah", "scott", "sean", "sharon", "sophia", "sophie",
    "stephanie", "stephen", "steve", "steven", "susan", "tanya", "taylor", "teresa", "thomas", "tim",
    "timothy", "tina", "todd", "tom", "tony", "tyler", "valerie", "vanessa", "victor", "victoria", "vincent",
    "walter", "wayne", "wei", "william", "yuki", "zach", "zoe", "ahmed", "ali", "anh", "chen", "deepak",
    "hiroshi", "jin", "kenji", "li", "ming", "minh", "sakura", "yuna", "ji-ho", "min-jun", "seo-yeon",
    "hana", "diego", "javier", "lucia", "sofia", "mateo", "pablo", "giulia", "marco", "luca", "hans",
    "lena", "anja", "olga", "ivan", "dmitri", "nina", "amir", "layla", "tupac",
];

/// Companies, bands and teams known by one name (a gazetteer for
/// `organization`): a name no cue of its own types.
pub const ORGANIZATIONS: &[&str] = &[
    "google", "apple", "microsoft", "amazon", "meta", "netflix", "spotify", "disney", "pixar", "nintendo",
    "sony", "samsung", "tesla", "ford", "toyota", "honda", "bmw", "ibm", "intel", "nvidia", "oracle",
    "adobe", "uber", "airbnb", "starbucks", "mcdonald's", "walmart", "target", "costco", "ikea", "nike",
    "adidas", "logitech", "sennheiser", "bose", "lego", "nasa", "unicef", "unesco", "red cross",
    "greenpeace", "aerosmith", "beatles", "the beatles", "metallica", "coldplay", "nirvana",
    "chelsea", "arsenal", "manchester city", "manchester united", "real madrid", "barcelona fc",
    "fc barcelona", "juventus", "bayern munich", "lakers", "yankees", "red sox", "ubisoft", "blizzard",
    "valve", "epic games", "riot games", "openai", "linkedin", "twitter", "youtube", "reddit", "github",
];

/// Products and services known by name (a gazetteer for `product`).
pub const PRODUCTS: &[&str] = &[
    "iphone", "ipad", "macbook", "playstation", "ps5", "ps4", "xbox", "nintendo switch", "kindle", "alexa",
    "facebook", "instagram", "tiktok", "whatsapp", "snapchat", "zoom", "slack", "discord", "twitch",
    "unity", "unreal engine", "photoshop", "excel", "chatgpt", "mustang", "ford mustang", "ferrari",
    "prius", "corvette", "camaro", "model 3", "model s", "vespa", "peloton", "fitbit", "apple watch",
];

/// Words that make a turn about pets: a one-word name said in such a turn
/// and typed by nothing else is a pet ("Luna and Oliver! ... the cat").
pub const PET_CONTEXT: &[&str] = &[
    "dog", "dogs", "cat", "cats", "puppy", "puppies", "pup", "pups", "kitten", "kitty", "pet", "pets", "vet",
    "leash", "fur", "furry", "paw", "paws", "bark", "barks", "barking", "meow", "walkies", "fetch", "treats",
    "breed", "adopted", "adopt", "kibble", "litter", "collar", "guinea", "hamster", "bunny", "parrot",
];

/// Words that make a sentence about a title: a name typed by nothing else
/// in such a sentence is a `work` (book, film, game, song, series).
pub const WORK_CONTEXT: &[&str] = &[
    "book", "books", "novel", "novels", "read", "reading", "author", "series", "game", "games", "gaming",
    "movie", "movies", "film", "films", "song", "songs", "album", "track", "show", "episode", "season",
    "chapter", "trilogy", "sequel", "playing", "played", "watched", "watching",
];

/// Sports and exercise done ("I'm doing kickboxing"): `plays` values.
pub const SPORTS: &[&str] = &[
    "kickboxing", "boxing", "taekwondo", "karate", "judo", "jiu-jitsu", "yoga", "pilates", "crossfit",
    "weight training", "weightlifting", "surfing", "skiing", "snowboarding", "skating", "skateboarding",
    "climbing", "rock climbing", "bouldering", "swimming", "running", "cycling", "rowing", "fencing",
    "archery", "dance", "dancing", "ballet", "zumba", "spinning", "martial arts", "boot camp", "bootcamp",
];

/// Nouns that end an event phrase ("an LGBTQ support group", "a pottery
/// class"): `attended` values.
pub const EVENT_NOUNS: &str = "class|classes|workshop|conference|meeting|parade|festival|concert|gala|group|reading|show|course|seminar|retreat|camp|party|session|lecture|tournament|fair|match|exhibition|convention|meetup|program|programme|ceremony|wedding|fundraiser|marathon|race|game night|game|event|talk|performance|recital|protest|rally|service";

/// Nouns of things made ("a horse painting", "my first mobile game"): `created` values.
pub const MADE_NOUNS: &str = "painting|paintings|portrait|drawing|sketch|sculpture|mural|song|songs|poem|poems|book|novel|story|stories|blog|website|site|app|application|game|album|film|video|podcast|vase|bowl|bowls|quilt|sweater|scarf|cake|cookies|bread|table|shelf|garden|playlist|comic|photo|photos|necklace|bracelet|card|cards|window";

/// Nouns of groups one joins ("a chess club", "a nearby church"): `member_of` values.
pub const GROUP_NOUNS: &str = "group|club|band|gym|church|team|brigade|program|programme|choir|league|community|organization|organisation|association|society|union|committee|crew|troupe|orchestra|guild|circle|network|nonprofit|charity";
