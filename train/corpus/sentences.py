"""The synthetic sentence set: assistant requests and questions, numbers, general
sentences.  Texts are in spoken form (lower case, numbers as words), which is
what the demo model is trained to output (``woitn``)."""
from __future__ import annotations

import random
from typing import List, Sequence

ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        r = n % 100
        return ONES[n // 100] + " hundred" + ("" if r == 0 else " and " + number_words(r))
    if n < 1_000_000:
        r = n % 1000
        head = number_words(n // 1000) + " thousand"
        if r == 0:
            return head
        return head + (" and " if r < 100 else " ") + number_words(r)
    raise ValueError(f"number {n} too large")


CITIES = ["london", "paris", "berlin", "tokyo", "madrid", "rome", "boston", "chicago", "seattle", "denver",
          "dublin", "oslo", "vienna", "sydney", "toronto", "lisbon", "prague", "cairo", "miami", "austin"]
ROOMS = ["kitchen", "bedroom", "living room", "bathroom", "office", "garage", "hallway", "garden"]
DEVICES = ["lights", "heater", "fan", "radio", "television", "lamp", "speaker", "coffee machine"]
GENRES = ["jazz", "classical", "rock", "pop", "folk", "blues", "country", "piano", "relaxing", "dance"]
TASKS = ["call my mother", "buy some milk", "water the plants", "take out the trash", "pay the rent",
         "send the report", "book a table", "walk the dog", "check the mail", "feed the cat"]
PEOPLE = ["anna", "peter", "maria", "john", "sarah", "david", "emma", "michael", "laura", "tom"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
UNITS = [("kilometers", "miles"), ("pounds", "kilograms"), ("cups", "liters"), ("feet", "meters"),
         ("ounces", "grams"), ("inches", "centimeters")]

QUESTIONS = [
    "what time is it", "what day is it today", "what is the weather like today",
    "will it rain tomorrow", "how are you today", "what can you do", "who are you",
    "what is your name", "tell me a joke", "what is the capital of france",
    "how far away is the moon", "how tall is mount everest", "what is the date today",
    "is it going to be cold tonight", "do i need an umbrella", "what should i cook for dinner",
    "how do you spell necessary", "what is the meaning of life", "can you help me",
    "where is the nearest train station", "what is on my calendar", "how long is the meeting",
    "when does the store close", "what is the news today", "how many days are in a leap year",
]
GENERAL = [
    "the quick brown fox jumps over the lazy dog", "she sells sea shells by the sea shore",
    "a journey of a thousand miles begins with a single step", "the early bird catches the worm",
    "it was a bright cold day in april", "the rain in spain stays mainly in the plain",
    "please close the door behind you", "we will meet at the station after lunch",
    "the library opens at nine in the morning", "my favourite colour is blue",
    "the children are playing in the park", "he forgot his keys at home again",
    "the train was late because of the snow", "i would like a cup of tea",
    "the museum is closed on mondays", "she is reading a book about history",
    "they moved to a small house near the river", "the cat is sleeping on the sofa",
    "we need to buy bread and eggs", "the concert starts at eight tonight",
    "thank you very much for your help", "good morning everyone", "see you later",
    "the sun rises in the east", "this is a test of the speech recognition system",
    "turn left at the next corner", "the meeting has been moved to thursday",
    "could you speak a little slower", "the garden is full of flowers in spring",
    "the weather has been lovely this week", "i am looking forward to the weekend",
    "the package arrived this morning", "he plays the guitar in a band",
    "the soup needs a little more salt", "our flight leaves early tomorrow",
    "the office is on the third floor", "she painted the fence white",
    "the road is closed for repairs", "we watched a film last night", "the baby is finally asleep",
]


def _time(rng: random.Random) -> str:
    h = rng.randint(1, 12)
    m = rng.choice([0, 0, 15, 30, 45, 5, 10, 20, 40, 50])
    ampm = rng.choice(["in the morning", "in the afternoon", "in the evening", "", ""])
    t = number_words(h) + (" o'clock" if m == 0 else (" oh " + number_words(m) if m < 10 else " " + number_words(m)))
    return (t + " " + ampm).strip()


def _templates(rng: random.Random) -> str:
    n = rng.randint(1, 90)
    t = rng.randrange(16)
    if t == 0:
        return f"set a timer for {number_words(n)} minutes"
    if t == 1:
        return f"what is the weather in {rng.choice(CITIES)}"
    if t == 2:
        return f"turn {rng.choice(['on', 'off'])} the {rng.choice(ROOMS)} {rng.choice(DEVICES)}"
    if t == 3:
        return f"play some {rng.choice(GENRES)} music"
    if t == 4:
        return f"remind me to {rng.choice(TASKS)} at {_time(rng)}"
    if t == 5:
        return f"call {rng.choice(PEOPLE)} on {rng.choice(WEEKDAYS)}"
    if t == 6:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        op = rng.choice(["plus", "minus", "times"])
        return f"what is {number_words(a)} {op} {number_words(b)}"
    if t == 7:
        u = rng.choice(UNITS)
        return f"convert {number_words(n)} {u[0]} to {u[1]}"
    if t == 8:
        return f"wake me up at {_time(rng)}"
    if t == 9:
        return f"set the volume to {number_words(rng.randint(1, 10))}"
    if t == 10:
        return f"the number is {number_words(rng.randint(0, 9999))}"
    if t == 11:
        return f"send a message to {rng.choice(PEOPLE)} saying i will be late"
    if t == 12:
        return f"how long does it take to get to {rng.choice(CITIES)}"
    if t == 13:
        return f"add {rng.choice(['milk', 'eggs', 'apples', 'bread', 'coffee', 'rice'])} to my shopping list"
    if t == 14:
        return rng.choice(QUESTIONS)
    return rng.choice(GENERAL)


def open_frame(rng: random.Random, words: Sequence[str], names: Sequence[str]) -> str:
    """A template's frame with its slots open: any common word, name or number where the
    templates offer ten genres, cities or rooms and a few numbers.  A recogniser that heard the
    templates' sentences thousands of times writes one of them for a sentence it never heard
    ("play some pop music", held out, came out as "play some folk music", and "set a timer for
    forty minutes" as "fourteen minutes"); with open slots the frame says nothing of the word
    in it, which can only be learnt from the sound."""
    def w() -> str:
        return rng.choice(words)

    def num(hi: int) -> str:
        return number_words(rng.randint(0, hi))

    t = rng.randrange(16)
    if t == 0:
        return f"set a timer for {num(rng.choice([20, 120, 999]))} {rng.choice(['minutes', 'seconds', 'hours', w()])}"
    if t == 1:
        return f"what is the weather {rng.choice(['in', 'like in', 'in', 'near'])} {rng.choice([w(), rng.choice(names)])}"
    if t == 2:
        return f"turn {rng.choice(['on', 'off'])} the {w()} {w()}"
    if t == 3:
        return f"play some {w()} {rng.choice(['music', 'music', 'songs', w()])}"
    if t == 4:
        return f"remind me to {w()} {rng.choice(['the', 'my', 'a', 'some'])} {w()} at {_clock(rng)}"
    if t == 5:
        return f"call {rng.choice(names)} {rng.choice(['on ' + rng.choice(WEEKDAYS), 'at ' + _clock(rng), 'about ' + w(), 'now'])}"
    if t == 6:
        return f"what is {num(rng.choice([20, 999]))} {rng.choice(['plus', 'minus', 'times', 'divided by'])} {num(rng.choice([20, 999]))}"
    if t == 7:
        a, b = rng.sample([u for pair in UNITS for u in pair], 2)
        return f"convert {num(rng.choice([20, 999]))} {a} to {b}"
    if t == 8:
        return f"wake me up at {_clock(rng)}{rng.choice(['', ' ' + rng.choice(WEEKDAYS), ' tomorrow'])}"
    if t == 9:
        return f"set the {rng.choice(['volume', 'volume', 'brightness', w()])} to {num(100)}"
    if t == 10:
        return f"the {rng.choice(['number', 'answer', 'code', w()])} is {num(rng.choice([99, 9999, 99999]))}"
    if t == 11:
        return f"send a message to {rng.choice(names)} saying {' '.join(w() for _ in range(rng.randint(1, 5)))}"
    if t == 12:
        return f"how long does it take to get to {rng.choice([w(), rng.choice(names)])}"
    if t == 13:
        return f"add {' '.join(w() for _ in range(rng.randint(1, 2)))} to my {rng.choice(['shopping list', 'calendar', w() + ' list'])}"
    if t == 14:
        lead = rng.choice(['timer set for', 'alarm set for', 'in'])
        when = f"{num(120)} {rng.choice(['minutes', 'seconds', 'hours'])}" if rng.random() < 0.5 else _clock(rng)
        return f"{lead} {when}"
    return f"{rng.choice(['what is', 'where is', 'who is', 'how do i', 'tell me about', 'show me'])} {' '.join(w() for _ in range(rng.randint(1, 3)))}"


def vocabulary() -> List[str]:
    """Every word the templates and static sentences can say (sorted, unique)."""
    words = set()
    for text in QUESTIONS + GENERAL + CITIES + ROOMS + DEVICES + GENRES + TASKS + PEOPLE + WEEKDAYS:
        words.update(text.split())
    for a, b in UNITS:
        words.update((a, b))
    words.update(ONES + TENS[2:] + ["hundred", "thousand", "and", "minus", "oh", "o'clock"])
    return sorted(words)


_VOCAB: List[str] = []


def _word_salad(rng: random.Random) -> str:
    # Random word strings: a recogniser trained only on templates learns the templates (a
    # sentence prior that overrides the audio: "what time is it" came out as "set a timer for
    # forty five minutes"); words in random order can only be learnt from the sound.
    if not _VOCAB:
        _VOCAB.extend(vocabulary())
    return " ".join(rng.choice(_VOCAB) for _ in range(rng.randint(2, 7)))


def _clock(rng: random.Random) -> str:
    """A time of day as Parley's voice says it (tts/textnorm: "8:44 AM" -> "eight forty four a m")."""
    h, m = rng.randint(1, 12), rng.randint(0, 59)
    t = number_words(h)
    if m == 0:
        t += rng.choice([" o'clock", ""])
    elif m < 10:
        t += " oh " + number_words(m)
    else:
        t += " " + number_words(m)
    return t + rng.choice([" a m", " p m", " a m", " p m", ""])


def _reply(rng: random.Random) -> str:
    """What Parley itself says: the answers its offline skills speak (the harness's ear, and a
    user's recordings of Parley, are transcribed by the same model)."""
    t = rng.randrange(6)
    if t == 0:
        return f"it's {_clock(rng)}"
    if t == 1:
        return f"in {rng.choice(CITIES)} it's {_clock(rng)}"
    if t == 2:
        return f"timer set for {number_words(rng.randint(1, 90))} {rng.choice(['minutes', 'seconds', 'hours'])}"
    if t == 3:
        return f"alarm set for {_clock(rng)} {rng.choice(['today', 'tomorrow'])}"
    if t == 4:
        return f"today is {rng.choice(WEEKDAYS)}"
    return f"the answer is {number_words(rng.randint(0, 9999))}"


STYLES = ("templates", "mixed", "assistant")


def sentence(rng: random.Random, style: str = "templates") -> str:
    """One sentence.  ``templates`` is the original distribution (what the first three demo
    phases trained on); ``mixed`` is 35% word salad, 20% the assistant's questions and 45%
    templates (phase 4); ``assistant`` is 30% word salad, 15% questions, 20% Parley's own
    replies and 35% templates (phase 5)."""
    if style == "templates":
        return _templates(rng)
    if style not in STYLES:
        raise ValueError(f"unknown sentence style {style!r} (want one of {', '.join(STYLES)})")
    r = rng.random()
    if style == "assistant":  # mixed, with Parley's own replies in place of some templates
        if r < 0.3:
            return _word_salad(rng)
        if r < 0.45:
            return rng.choice(QUESTIONS)
        if r < 0.65:
            return _reply(rng)
        return _templates(rng)
    if r < 0.35:
        return _word_salad(rng)
    if r < 0.55:
        return rng.choice(QUESTIONS)
    return _templates(rng)


def all_static() -> List[str]:
    return QUESTIONS + GENERAL


def sentences(n: int, seed: int, style: str = "templates") -> List[str]:
    rng = random.Random(seed)
    return [sentence(rng, style) for _ in range(n)]
