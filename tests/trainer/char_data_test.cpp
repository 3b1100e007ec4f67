// The reference GPT's character data: vocabulary, round trip, split, layout-independent batches and
// errors, on the bundled tiny-shakespeare corpus (data/tinyshakespeare.txt) and on small files.
#include "trainer/train/char_data.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>

namespace {

const std::string kCorpus = std::string(STRATA_DATA_DIR) + "/tinyshakespeare.txt";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A scratch file removed at the end of the test.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& content) {
    char name[] = "/tmp/strata_char_data_XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    close(fd);
    path = name;
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(CharData, ShakespeareVocabularyIsItsSortedDistinctBytes) {
  gpt::CharCorpus corpus(kCorpus);
  EXPECT_EQ(corpus.vocab(), 65);
  // Independent check: the distinct bytes of the file, sorted, are ids 0..64 in order.
  const std::string text = read_all(kCorpus);
  ASSERT_EQ(text.size(), 1115394u);
  const std::set<unsigned char> distinct(text.begin(), text.end());
  ASSERT_EQ(distinct.size(), 65u);
  int id = 0;
  for (unsigned char b : distinct) {
    const std::vector<int> enc = corpus.encode(std::string(1, char(b)));
    ASSERT_EQ(enc.size(), 1u);
    EXPECT_EQ(enc[0], id++) << "byte " << int(b);
  }
  EXPECT_EQ(corpus.encode("\n")[0], 0);  // the smallest byte of the corpus
  EXPECT_EQ(corpus.decode(std::vector<int>{64}), "z");
}

TEST(CharData, EncodeDecodeRoundTrip) {
  gpt::CharCorpus corpus(kCorpus);
  const std::string text = read_all(kCorpus);
  const std::string head = text.substr(0, 5000);
  EXPECT_EQ(corpus.decode(corpus.encode(head)), head);
  EXPECT_EQ(corpus.decode(corpus.encode("First Citizen:\n")), "First Citizen:\n");
  EXPECT_TRUE(corpus.encode("").empty());
}

TEST(CharData, SplitIsTheLastFraction) {
  gpt::CharCorpus corpus(kCorpus, 0.1);
  const size_t n = 1115394;
  EXPECT_EQ(corpus.size(gpt::Split::train) + corpus.size(gpt::Split::val), n);
  EXPECT_EQ(corpus.size(gpt::Split::val), size_t(double(n) * 0.1));
  // The validation split is the file's tail: its batches come from that text only.
  TempFile f("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabbbbbbbbbb");  // 40 a, then 10 b
  gpt::CharCorpus ab(f.path, 0.2);
  EXPECT_EQ(ab.size(gpt::Split::train), 40u);
  EXPECT_EQ(ab.size(gpt::Split::val), 10u);
  std::vector<int> tok, tgt;
  ab.batch(gpt::Split::val, 1, 0, 0, 16, 4, tok, tgt);
  for (int t : tok) EXPECT_EQ(t, 1);
  ab.batch(gpt::Split::train, 1, 0, 0, 16, 4, tok, tgt);
  for (int t : tok) EXPECT_EQ(t, 0);
}

TEST(CharData, TargetsAreTokensShiftedByOne) {
  gpt::CharCorpus corpus(kCorpus);
  const std::string text = read_all(kCorpus);
  const int T = 32;
  std::vector<int> tok, tgt;
  corpus.batch(gpt::Split::train, 7, 3, 0, 6, T, tok, tgt);
  ASSERT_EQ(tok.size(), 6u * T);
  ASSERT_EQ(tgt.size(), 6u * T);
  for (int s = 0; s < 6; ++s) {
    for (int t = 0; t + 1 < T; ++t) EXPECT_EQ(tgt[s * T + t], tok[s * T + t + 1]);
    // Every sequence, with its last target, is a contiguous piece of the text.
    std::vector<int> piece(tok.begin() + s * T, tok.begin() + (s + 1) * T);
    piece.push_back(tgt[s * T + T - 1]);
    EXPECT_NE(text.find(corpus.decode(piece)), std::string::npos) << "sequence " << s;
  }
}

TEST(CharData, AnySlicingOfAGlobalBatchGivesTheSameSequences) {
  gpt::CharCorpus corpus(kCorpus);
  const int T = 16;
  std::vector<int> all_tok, all_tgt, a_tok, a_tgt, b_tok, b_tgt;
  corpus.batch(gpt::Split::train, 42, 5, 0, 4, T, all_tok, all_tgt);
  corpus.batch(gpt::Split::train, 42, 5, 0, 2, T, a_tok, a_tgt);
  corpus.batch(gpt::Split::train, 42, 5, 2, 2, T, b_tok, b_tgt);
  a_tok.insert(a_tok.end(), b_tok.begin(), b_tok.end());
  a_tgt.insert(a_tgt.end(), b_tgt.begin(), b_tgt.end());
  EXPECT_EQ(a_tok, all_tok);
  EXPECT_EQ(a_tgt, all_tgt);
  // One sequence at a time, too (4 ranks of 1).
  for (size_t i = 0; i < 4; ++i) {
    corpus.batch(gpt::Split::train, 42, 5, i, 1, T, b_tok, b_tgt);
    EXPECT_TRUE(std::equal(b_tok.begin(), b_tok.end(), all_tok.begin() + ptrdiff_t(i) * T));
  }
  // A different step, seed or split gives different sequences.
  corpus.batch(gpt::Split::train, 42, 6, 0, 4, T, b_tok, b_tgt);
  EXPECT_NE(b_tok, all_tok);
  corpus.batch(gpt::Split::train, 43, 5, 0, 4, T, b_tok, b_tgt);
  EXPECT_NE(b_tok, all_tok);
  corpus.batch(gpt::Split::val, 42, 5, 0, 4, T, b_tok, b_tgt);
  EXPECT_NE(b_tok, all_tok);
  // Within a batch the sequences differ (the starts are spread over the split).
  EXPECT_FALSE(std::equal(all_tok.begin(), all_tok.begin() + T, all_tok.begin() + T));
}

TEST(CharData, StartsCoverTheSplit) {
  // Over many batches the start offsets reach both ends of the split: with a 12-token split and
  // T = 4 there are 12 - 4 - 1 = 7 possible starts, and each appears.
  TempFile f("abcdefghijkl");
  gpt::CharCorpus c(f.path, 0.0);
  std::set<int> firsts;
  std::vector<int> tok, tgt;
  for (uint64_t step = 0; step < 50; ++step) {
    c.batch(gpt::Split::train, 9, step, 0, 4, 4, tok, tgt);
    for (int s = 0; s < 4; ++s) firsts.insert(tok[s * 4]);
  }
  EXPECT_EQ(firsts, (std::set<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(CharData, Errors) {
  const std::string missing = "/nonexistent/strata/corpus.txt";
  const std::string e1 = error_of([&] { gpt::CharCorpus c(missing); });
  EXPECT_NE(e1.find(missing), std::string::npos) << e1;
  EXPECT_THROW(gpt::CharCorpus c(missing), std::runtime_error);

  TempFile tiny("a");
  EXPECT_THROW(gpt::CharCorpus c(tiny.path), std::runtime_error);
  EXPECT_NE(error_of([&] { gpt::CharCorpus c(tiny.path); }).find(tiny.path), std::string::npos);

  gpt::CharCorpus corpus(kCorpus);
  const std::string e2 = error_of([&] { corpus.encode("hello\x01world"); });
  EXPECT_NE(e2.find("0x01"), std::string::npos) << e2;
  EXPECT_THROW(corpus.encode("caf\xc3\xa9"), std::runtime_error);
  EXPECT_NE(error_of([&] { corpus.encode("#"); }).find("'#'"), std::string::npos);
  EXPECT_THROW(corpus.decode(std::vector<int>{65}), std::runtime_error);
  EXPECT_THROW(corpus.decode(std::vector<int>{-1}), std::runtime_error);

  // A split too short for the sequence length names the file.
  TempFile small("abcdefghij");
  gpt::CharCorpus sc(small.path, 0.0);
  std::vector<int> tok, tgt;
  EXPECT_NO_THROW(sc.batch(gpt::Split::train, 1, 0, 0, 1, 8, tok, tgt));
  const std::string e3 = error_of([&] { sc.batch(gpt::Split::train, 1, 0, 0, 1, 9, tok, tgt); });
  EXPECT_NE(e3.find(small.path), std::string::npos) << e3;
  EXPECT_THROW(sc.batch(gpt::Split::val, 1, 0, 0, 1, 2, tok, tgt), std::runtime_error);
}

}  // namespace
