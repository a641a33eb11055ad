// The Porter stemmer (Porter 1980, "An algorithm for suffix stripping") in
// the variant NLTK's PorterStemmer uses by default (mode NLTK_EXTENSIONS),
// which METEOR's stem stage is defined with here: a few irregular forms
// (skies, dying, lying, tying, news, innings, outings, cannings, howe,
// proceed, exceed, succeed), words of one or two letters left alone,
// "ies"/"ied" -> "ie" for four-letter words, step 1c's y -> i only after a
// consonant that is not the first letter, "alli" -> "al" tried before the rest of
// step 2 (and step 2 run again), "bli" -> "ble", "fulli" -> "ful",
// "logi" -> "log", and a two-letter vowel-consonant word counting as cvc.
#pragma once

#include <string>
#include <string_view>

namespace zcode::textmetrics {

/// The stem of one lower-case word (ASCII letters are what the rules look
/// at; other bytes count as consonants, as in NLTK).
std::string porter_stem(std::string_view word);

}  // namespace zcode::textmetrics
