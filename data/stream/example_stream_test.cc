// Streamed input: file patterns, gzip'd bytes read in pieces, records with
// their offsets, and tabular examples streamed, sharded, shuffled and
// resumed from a position.
#include "data/stream/example_stream.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/record_writer.h"
#include "data/feature_hash.h"
#include "data/formats/csv_format.h"
#include "data/formats/input_stream.h"
#include "data/formats/record_stream.h"
#include "data/stream/file_pattern.h"
#include "data/stream/streamed_batches.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"
#include "testing/data_test_util.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

using testutil::ExampleWithId;
using testutil::WriteExampleFiles;

ExampleStreamOptions Options(std::vector<std::string> files) {
  ExampleStreamOptions o;
  o.files = std::move(files);
  o.features.num_dense = 1;
  o.features.sparse = {"ids"};
  o.batch_size = 3;
  o.cycle_length = 2;
  o.shuffle_buffer = 7;
  o.seed = 42;
  return o;
}

// The ids of a batch, checking that every example's features agree.
std::vector<int64_t> Ids(const Dataset& batch) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const int64_t id = static_cast<int64_t>(batch.dense[i]);
    EXPECT_EQ(batch.labels[i], id % 2);
    const SparseFeatureColumn& c = batch.sparse[0];
    EXPECT_EQ(c.offsets[i + 1] - c.offsets[i], 2);
    EXPECT_EQ(c.values[c.offsets[i]], static_cast<uint64_t>(id));
    ids.push_back(id);
  }
  return ids;
}

// Every batch's ids until the stream ends (at most `limit` batches).
std::vector<std::vector<int64_t>> Drain(ExampleStream& stream, int limit = 10000) {
  std::vector<std::vector<int64_t>> batches;
  Dataset batch;
  for (int i = 0; i < limit; ++i) {
    absl::Status s = stream.Next(&batch);
    if (absl::IsOutOfRange(s)) break;
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    batches.push_back(Ids(batch));
  }
  return batches;
}

class ExampleStreamTest : public ::testing::Test {
 protected:
  std::string dir_ = testing_util::TempDirRemovedAtExit("example_stream");
};

TEST_F(ExampleStreamTest, PatternsExpandInNameOrderAndNameWhatMatchesNothing) {
  std::filesystem::create_directories(dir_ + "/day=1");
  std::filesystem::create_directories(dir_ + "/day=2");
  for (const char* name :
       {"day=2/part-1", "day=1/part-1", "day=1/part-0", "day=1/.part-2.tmp", "day=1/other"}) {
    WriteFile(dir_ + "/" + name, "x");
  }
  absl::StatusOr<std::vector<std::string>> files =
      ExpandFilePatterns(Env::Default(), dir_ + "/day=*/part-*", "training.train_files");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir_ + "/day=1/part-0", dir_ + "/day=1/part-1",
                                              dir_ + "/day=2/part-1"}));
  // A list: in the order given, each file once.
  files = ExpandFilePatterns(
      Env::Default(), dir_ + "/day=2/part-1, " + dir_ + "/day=1/part-?," + dir_ + "/day=2/part-1",
      "training.train_files");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir_ + "/day=2/part-1", dir_ + "/day=1/part-0",
                                              dir_ + "/day=1/part-1"}));
  absl::Status s =
      ExpandFilePatterns(Env::Default(), dir_ + "/day=*/nope-*", "training.train_files").status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("training.train_files"), std::string::npos) << s;
  EXPECT_NE(s.message().find("nope-*"), std::string::npos) << s;
  s = ExpandFilePatterns(Env::Default(), dir_ + "/missing", "--train_files").status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_FALSE(ExpandFilePatterns(Env::Default(), " , ", "--train_files").ok());
}

TEST_F(ExampleStreamTest, GzipIsReadInPiecesAndReopenedAtAnyOffset) {
  std::string text;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&text, "line ", i, "\n");
  // Two members, as `cat a.gz b.gz` makes.
  const std::string half = text.substr(0, text.size() / 2);
  WriteFile(dir_ + "/t.gz", testutil::Gzip(half) + testutil::Gzip(text.substr(half.size())));
  WriteFile(dir_ + "/t", text);
  for (const char* name : {"t.gz", "t"}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{half.size()}, uint64_t{99999}}) {
      absl::StatusOr<std::unique_ptr<InputStream>> in =
          InputStream::Open(Env::Default(), dir_ + "/" + name, Compression::kAuto, offset);
      ASSERT_TRUE(in.ok()) << in.status();
      std::string all, piece;
      do {
        ASSERT_TRUE((*in)->Read(4093, &piece).ok());
        all += piece;
      } while (!piece.empty());
      EXPECT_EQ(all, text.substr(offset)) << name << " at " << offset;
      EXPECT_EQ((*in)->position(), text.size());
    }
  }
  // Cut short and damaged: DataLoss naming the file.
  const std::string gz = testutil::Gzip(text);
  WriteFile(dir_ + "/cut.gz", gz.substr(0, gz.size() / 2));
  std::string bad = gz;
  bad[bad.size() / 2] ^= 0x55;
  bad[bad.size() / 2 + 1] ^= 0x55;
  WriteFile(dir_ + "/bad.gz", bad);
  for (const char* name : {"cut.gz", "bad.gz"}) {
    absl::StatusOr<std::unique_ptr<InputStream>> in =
        InputStream::Open(Env::Default(), dir_ + "/" + name, Compression::kAuto);
    ASSERT_TRUE(in.ok()) << in.status();
    std::string piece;
    absl::Status s;
    for (int i = 0; i < 1000 && s.ok(); ++i) {
      s = (*in)->Read(1 << 16, &piece);
      if (s.ok() && piece.empty()) break;
    }
    EXPECT_TRUE(absl::IsDataLoss(s)) << name << ": " << s;
    EXPECT_NE(s.message().find(name), std::string::npos) << s;
  }
  EXPECT_TRUE(absl::IsNotFound(
      InputStream::Open(Env::Default(), dir_ + "/none.gz", Compression::kAuto).status()));
}

TEST_F(ExampleStreamTest, RecordsCarryOffsetsToReopenAtAndDamageIsNamed) {
  std::string bytes;
  for (int i = 0; i < 50; ++i)
    bytes += RecordWriter::Frame(std::string(i * 37 % 300, 'a' + i % 26));
  WriteFile(dir_ + "/r.tfrecord.gz", testutil::Gzip(bytes));
  absl::StatusOr<std::unique_ptr<RecordStream>> r = RecordStream::Open(
      Env::Default(), dir_ + "/r.tfrecord.gz", Compression::kAuto, RecordFraming::kTfRecord);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> records;
  uint64_t offset_of_20 = 0;
  while (true) {
    if ((*r)->record() == 20) offset_of_20 = (*r)->offset();
    absl::StatusOr<std::string_view> rec = (*r)->Next();
    if (absl::IsOutOfRange(rec.status())) break;
    ASSERT_TRUE(rec.ok()) << rec.status();
    records.emplace_back(*rec);
  }
  ASSERT_EQ(records.size(), 50u);
  absl::StatusOr<std::unique_ptr<RecordStream>> again =
      RecordStream::Open(Env::Default(), dir_ + "/r.tfrecord.gz", Compression::kAuto,
                         RecordFraming::kTfRecord, offset_of_20, 20);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<std::string_view> rec = (*again)->Next();
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(*rec, records[20]);
  EXPECT_EQ((*again)->record(), 21);
  // A flipped byte in record 3's data: DataLoss naming the file and offset.
  std::string damaged = bytes;
  uint64_t offset_of_3 = 0;
  for (int i = 0; i < 3; ++i) offset_of_3 += RecordWriter::Frame(records[i]).size();
  damaged[offset_of_3 + 12] ^= 1;
  WriteFile(dir_ + "/d.tfrecord", damaged);
  r = RecordStream::Open(Env::Default(), dir_ + "/d.tfrecord", Compression::kAuto,
                         RecordFraming::kTfRecord);
  ASSERT_TRUE(r.ok());
  absl::Status s;
  for (int i = 0; i < 4 && s.ok(); ++i) s = (*r)->Next().status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find(absl::StrCat("d.tfrecord: record at offset ", offset_of_3)),
            std::string::npos)
      << s;
  // Lines: a last line without its end is a file cut short, unless accepted.
  WriteFile(dir_ + "/l.tsv", "a\tb\r\nc\nlast");
  for (bool accept : {false, true}) {
    r = RecordStream::Open(Env::Default(), dir_ + "/l.tsv", Compression::kAuto,
                           RecordFraming::kLines);
    ASSERT_TRUE(r.ok());
    if (accept) (*r)->AcceptUnterminatedLastLine();
    EXPECT_EQ(*(*r)->Next(), "a\tb");
    EXPECT_EQ(*(*r)->Next(), "c");
    absl::StatusOr<std::string_view> last = (*r)->Next();
    if (accept) {
      ASSERT_TRUE(last.ok()) << last.status();
      EXPECT_EQ(*last, "last");
    } else {
      EXPECT_TRUE(absl::IsDataLoss(last.status())) << last.status();
      EXPECT_NE(last.status().message().find("l.tsv:3"), std::string::npos) << last.status();
    }
  }
}

TEST_F(ExampleStreamTest, EveryReplicaReadsItsShareAndEachEpochEveryExampleOnce) {
  // 5 files of 11 among 2 replicas; then 1 file among 3 (records dealt out).
  for (const auto& [files, per_file, replicas] :
       std::vector<std::tuple<int, int, int>>{{5, 11, 2}, {1, 40, 3}}) {
    const std::string dir = testing_util::TempDirRemovedAtExit("example_stream_share");
    const std::vector<std::string> paths = WriteExampleFiles(dir, files, per_file, false);
    const int64_t total = static_cast<int64_t>(files) * per_file;
    std::map<int64_t, std::vector<int>> seen;  // id -> the epoch of each time it came
    bool a_share_changed = false;
    for (int replica = 0; replica < replicas; ++replica) {
      ExampleStreamOptions o = Options(paths);
      o.replica = replica;
      o.num_replicas = replicas;
      o.num_epochs = 2;
      absl::StatusOr<std::unique_ptr<ExampleStream>> stream =
          ExampleStream::Create(Env::Default(), o);
      ASSERT_TRUE(stream.ok()) << stream.status();
      std::vector<std::vector<int64_t>> epochs;
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        epochs.push_back({});
        for (const FilePiece& p : EpochPieces(o, epoch)) {
          for (int64_t r = 0; r < per_file; ++r) {
            if (files >= replicas || r % replicas == replica) {
              epochs.back().push_back(p.file * per_file + r);
            }
          }
        }
      }
      std::vector<int64_t> ids;
      for (const std::vector<int64_t>& b : Drain(**stream))
        ids.insert(ids.end(), b.begin(), b.end());
      // Each epoch of this replica: the examples of its share of that
      // epoch's files, in another order.
      ASSERT_EQ(ids.size(), epochs[0].size() + epochs[1].size());
      std::vector<int64_t> first(ids.begin(), ids.begin() + epochs[0].size());
      std::vector<int64_t> second(ids.begin() + epochs[0].size(), ids.end());
      EXPECT_NE(first, epochs[0]);
      for (int e = 0; e < 2; ++e) {
        std::vector<int64_t>& got = e == 0 ? first : second;
        std::sort(got.begin(), got.end());
        std::sort(epochs[e].begin(), epochs[e].end());
        EXPECT_EQ(got, epochs[e]) << "replica " << replica << ", epoch " << e;
        for (int64_t id : got) seen[id].push_back(e);
      }
      a_share_changed |= epochs[0] != epochs[1];
      EXPECT_EQ((*stream)->progress().epoch, 1);
    }
    // Every epoch, every example once among the replicas.
    ASSERT_EQ(static_cast<int64_t>(seen.size()), total) << files << " files";
    for (auto& [id, times] : seen) {
      std::sort(times.begin(), times.end());
      EXPECT_EQ(times, (std::vector<int>{0, 1})) << "example " << id;
    }
    // The files are dealt anew each epoch (shuffle_files); records of one
    // file, to the same replicas.
    EXPECT_EQ(a_share_changed, files >= replicas) << files << " files";
  }
}

// The deal (data/stream/stream_deal.cc): with shuffle_files, each epoch's
// order of all the files is drawn from (seed, epoch), the same for every
// replica, and replica r takes every num_replicas-th file of it from r on;
// without, file i goes to replica i % num_replicas in name order; following
// new files keeps that deal.
TEST_F(ExampleStreamTest, EachEpochDealsTheFilesFromOneShuffledOrder) {
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) names.push_back(absl::StrCat("/d/day-", i, ".csv"));
  const auto share = [&](int replica, int64_t epoch, bool shuffle, uint64_t seed) {
    ExampleStreamOptions o = Options(names);
    o.replica = replica;
    o.num_replicas = 3;
    o.shuffle_files = shuffle;
    o.seed = seed;
    std::vector<int64_t> files;
    for (const FilePiece& p : EpochPieces(o, epoch)) {
      EXPECT_EQ(p.offset, 0u);
      EXPECT_EQ(p.record, 0);
      files.push_back(p.file);
    }
    return files;
  };
  std::set<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 6; ++epoch) {
    // Interleaved, the replicas' shares are the epoch's order: every file once.
    std::vector<int64_t> order;
    const std::vector<std::vector<int64_t>> shares = {
        share(0, epoch, true, 42), share(1, epoch, true, 42), share(2, epoch, true, 42)};
    EXPECT_EQ(shares[0].size(), 4u);
    EXPECT_EQ(shares[1].size(), 3u);
    EXPECT_EQ(shares[2].size(), 3u);
    for (size_t k = 0; k < names.size(); ++k) order.push_back(shares[k % 3][k / 3]);
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    orders.insert(order);
    // Drawn from the seed and the epoch alone.
    EXPECT_EQ(share(1, epoch, true, 42), shares[1]);
    EXPECT_NE(share(0, epoch, true, 43), shares[0]) << "epoch " << epoch;
    // In name order without shuffle_files.
    EXPECT_EQ(share(0, epoch, false, 42), (std::vector<int64_t>{0, 3, 6, 9}));
    EXPECT_EQ(share(2, epoch, false, 42), (std::vector<int64_t>{2, 5, 8}));
  }
  EXPECT_EQ(orders.size(), 6u);  // a new order every epoch

  // Following new files: file i to replica i % num_replicas (the files
  // listed later are dealt so, data/stream/stream_deal.h ListedFilesOf).
  ExampleStreamOptions o = Options(names);
  o.replica = 1;
  o.num_replicas = 3;
  o.shuffle_buffer = 0;
  o.follow_list = "/job/input/files";
  std::vector<int64_t> files;
  for (const FilePiece& p : EpochPieces(o, 0)) files.push_back(p.file);
  EXPECT_EQ(files, (std::vector<int64_t>{1, 4, 7}));
}

// Progress lines say how far through its epoch a replica's stream is, by
// the bytes of its files read: rising, whole at the epoch's end.
TEST_F(ExampleStreamTest, ProgressCountsTheEpochsFilesAndBytes) {
  const std::vector<std::string> paths = WriteExampleFiles(dir_, 4, 30, /*gzip=*/true);
  uint64_t total_bytes = 0;
  for (const std::string& p : paths) total_bytes += *Env::Default()->FileSize(p);
  ExampleStreamOptions o = Options(paths);
  o.num_epochs = 1;
  absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ((*stream)->progress().num_epochs, 1);
  EXPECT_EQ((*stream)->progress().files, 4);
  Dataset batch;
  double last = 0;
  for (int i = 0; i < 50; ++i) {  // 120 examples, 3 per batch
    absl::Status s = (*stream)->Next(&batch);
    if (absl::IsOutOfRange(s)) break;
    ASSERT_TRUE(s.ok()) << s;
    const InputProgress p = (*stream)->progress();
    EXPECT_GE(p.fraction, last - 1e-12) << "batch " << i;
    EXPECT_LE(p.fraction, 1 + 1e-12);
    last = p.fraction;
  }
  const InputProgress done = (*stream)->progress();
  EXPECT_EQ(done.epoch, 0);
  EXPECT_EQ(done.files_done, 4);
  EXPECT_NEAR(done.fraction, 1.0, 1e-9);
  EXPECT_EQ(done.examples, 120);
  EXPECT_EQ(done.file_bytes, total_bytes);
  // Resumed after 2 of its files: they count as done.
  InputPosition at;
  at.next_file = 3;
  at.open = {{2, 0, 0}};
  absl::StatusOr<std::unique_ptr<ExampleStream>> resumed =
      ExampleStream::Create(Env::Default(), o, at);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->progress().files_done, 2);
  EXPECT_NEAR((*resumed)->progress().fraction, 0.5, 1e-9);
}

TEST_F(ExampleStreamTest, AStreamResumedAtAnyPositionContinuesWithTheSameBatches) {
  for (bool gzip : {false, true}) {
    const std::string dir = testing_util::TempDirRemovedAtExit("example_stream_resume");
    ExampleStreamOptions o = Options(WriteExampleFiles(dir, 4, 13, gzip));
    o.num_epochs = 3;
    o.replica = 1;
    o.num_replicas = 2;
    absl::StatusOr<std::unique_ptr<ExampleStream>> stream =
        ExampleStream::Create(Env::Default(), o);
    ASSERT_TRUE(stream.ok()) << stream.status();
    std::vector<InputPosition> positions;
    std::vector<std::vector<int64_t>> batches;
    Dataset batch;
    while (true) {
      positions.push_back((*stream)->position());
      absl::Status s = (*stream)->Next(&batch);
      if (absl::IsOutOfRange(s)) break;
      ASSERT_TRUE(s.ok()) << s;
      batches.push_back(Ids(batch));
    }
    ASSERT_EQ(batches.size(), 26u);  // 2 files x 13 examples x 3 epochs, 3 a batch
    for (size_t k = 0; k < batches.size(); k += gzip ? 5 : 1) {
      absl::StatusOr<InputPosition> at = InputPosition::FromString(positions[k].ToString());
      ASSERT_TRUE(at.ok()) << at.status();
      ASSERT_EQ(*at, positions[k]);
      absl::StatusOr<std::unique_ptr<ExampleStream>> resumed =
          ExampleStream::Create(Env::Default(), o, *at);
      ASSERT_TRUE(resumed.ok()) << resumed.status();
      const std::vector<std::vector<int64_t>> rest = Drain(**resumed);
      EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(batches.begin() + k, batches.end()))
          << "resumed at batch " << k << ": " << positions[k].ToString();
    }
  }
}

TEST_F(ExampleStreamTest, CriteoLinesStreamAndABadLineIsNamed) {
  std::string tsv;
  for (int i = 0; i < 30; ++i) {
    absl::StrAppend(&tsv, i % 2, "\t", i);
    for (int d = 1; d < 13; ++d) absl::StrAppend(&tsv, "\t");
    for (int c = 0; c < 26; ++c) absl::StrAppend(&tsv, "\t", c == 0 ? "0000abcd" : "");
    absl::StrAppend(&tsv, "\n");
  }
  WriteFile(dir_ + "/day_0.tsv.gz", testutil::Gzip(tsv));
  ExampleStreamOptions o = Options({dir_ + "/day_0.tsv.gz"});
  o.format = ExampleFormat::kCriteoTsv;
  o.shuffle_buffer = 0;
  o.num_epochs = 1;
  o.batch_size = 8;
  absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Dataset batch;
  int64_t examples = 0;
  std::vector<int> sizes;
  while (true) {
    absl::Status s = (*stream)->Next(&batch);
    if (absl::IsOutOfRange(s)) break;
    ASSERT_TRUE(s.ok()) << s;
    for (int64_t i = 0; i < batch.size(); ++i) EXPECT_EQ(batch.labels[i], (examples + i) % 2);
    examples += batch.size();
    sizes.push_back(static_cast<int>(batch.size()));
  }
  EXPECT_EQ(examples, 30);
  EXPECT_EQ(sizes, (std::vector<int>{8, 8, 8, 6}));  // the last batch is short
  // Line 12 with a bad label: named with the file and the line.
  std::string bad = tsv;
  size_t line_start = 0;
  for (int i = 0; i < 11; ++i) line_start = bad.find('\n', line_start) + 1;
  bad[line_start] = 'x';
  WriteFile(dir_ + "/day_1.tsv", bad);
  o.files = {dir_ + "/day_1.tsv"};
  stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::Status s;
  for (int i = 0; i < 10 && s.ok(); ++i) s = (*stream)->Next(&batch);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("day_1.tsv:12"), std::string::npos) << s;
  EXPECT_NE(s.message().find("label"), std::string::npos) << s;
}

// max_bad_records: bad lines, a damaged record and the damaged rest of a
// gzip file are skipped, each counted, up to the limit; the next one is the
// error, saying the limit. Without it the first is the error.
TEST_F(ExampleStreamTest, MaxBadRecordsSkipsBadDataUpToItsLimit) {
  // 20 Examples, records 3 and 9 damaged in their payload (their framing
  // checks out up to the data's checksum).
  std::string records;
  std::vector<size_t> payloads;
  for (int64_t id = 0; id < 20; ++id) {
    payloads.push_back(records.size() + 12);
    records += RecordWriter::Frame(ExampleWithId(id));
  }
  std::string damaged = records;
  damaged[payloads[3] + 2] ^= 0x55;
  damaged[payloads[9] + 2] ^= 0x55;
  WriteFile(dir_ + "/damaged.tfrecord", damaged);
  // A gzip file cut short: its rest is skipped as one bad record (read
  // after a whole file, so that the stream has examples).
  const std::string zipped = testutil::Gzip(records);
  WriteFile(dir_ + "/cut.tfrecord.gz", zipped.substr(0, zipped.size() / 2));
  WriteFile(dir_ + "/whole.tfrecord", records);
  const auto read = [&](std::vector<std::string> files, int64_t max_bad, int64_t* bad) {
    ExampleStreamOptions o = Options(std::move(files));
    o.shuffle_buffer = 0;
    o.num_epochs = 1;
    o.batch_size = 1;
    o.max_bad_records = max_bad;
    absl::StatusOr<std::unique_ptr<ExampleStream>> stream =
        ExampleStream::Create(Env::Default(), o);
    EXPECT_TRUE(stream.ok()) << stream.status();
    std::vector<int64_t> ids;
    Dataset batch;
    absl::Status s;
    for (int i = 0; i < 100; ++i) {
      s = (*stream)->Next(&batch);
      if (!s.ok()) break;
      ids.push_back(Ids(batch)[0]);
    }
    *bad = (*stream)->progress().bad_records;
    return std::make_pair(s, ids);
  };
  int64_t bad = 0;
  auto [s, ids] = read({dir_ + "/damaged.tfrecord"}, 2, &bad);
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_EQ(bad, 2);
  EXPECT_EQ(ids.size(), 18u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 3), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 9), 0);
  std::tie(s, ids) = read({dir_ + "/damaged.tfrecord"}, 1, &bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("damaged.tfrecord"), std::string::npos) << s;
  EXPECT_NE(s.message().find("max_bad_records 1 were skipped already"), std::string::npos) << s;
  EXPECT_EQ(ids.size(), 8u);  // 0-8 but 3; then record 9 stops it
  std::tie(s, ids) = read({dir_ + "/damaged.tfrecord"}, 0, &bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_EQ(s.message().find("max_bad_records"), std::string::npos) << s;
  EXPECT_EQ(ids.size(), 3u);
  // The cut gzip file: what was whole before the cut, then its end.
  std::tie(s, ids) = read({dir_ + "/whole.tfrecord", dir_ + "/cut.tfrecord.gz"}, 1, &bad);
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_EQ(bad, 1);
  EXPECT_GE(ids.size(), 20u);
  EXPECT_LT(ids.size(), 40u);
  std::tie(s, ids) = read({dir_ + "/whole.tfrecord", dir_ + "/cut.tfrecord.gz"}, 0, &bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("cut.tfrecord.gz"), std::string::npos) << s;
}

// CSV with a header through the stream: records whose quoted fields span
// lines are one example each, for every replica of an interleaved file;
// a stream resumed at any saved position goes on with the same batches; a
// file whose header differs is named.
TEST_F(ExampleStreamTest, CsvRecordsStreamAcrossLinesAndResume) {
  CsvSchema schema;
  schema.labels = {"y"};
  schema.numeric.emplace_back();
  schema.numeric.back().name = "x";
  schema.categorical.emplace_back();
  schema.categorical.back().name = "tag";
  schema.categorical.back().hash_buckets = 1000;
  std::string text = "\xEF\xBB\xBFx,note,y,tag\r\n";
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&text, i, ",", i % 3 == 0 ? "\"two\nlines, \"\"quoted\"\"\"" : "plain", ",",
                    i % 2, ",t", i % 5, "\r\n");
  }
  WriteFile(dir_ + "/a.csv.gz", testutil::Gzip(text));
  ExampleStreamOptions o = Options({dir_ + "/a.csv.gz"});
  o.format = ExampleFormat::kCsv;
  o.csv = schema;
  o.features.sparse = {"tag"};
  o.batch_size = 2;
  o.shuffle_buffer = 5;
  o.num_epochs = 2;
  // Two replicas share the one file's records, dealt out by the number of
  // the line each begins at (records of two lines shift the parity): every
  // record to one of them.
  std::set<int64_t> seen;
  int64_t examples = 0;
  for (int replica = 0; replica < 2; ++replica) {
    o.replica = replica;
    o.num_replicas = 2;
    absl::StatusOr<std::unique_ptr<ExampleStream>> stream =
        ExampleStream::Create(Env::Default(), o);
    ASSERT_TRUE(stream.ok()) << stream.status();
    Dataset batch;
    std::vector<std::string> positions;
    std::vector<std::vector<float>> batches;
    while (true) {
      positions.push_back((*stream)->position().ToString());
      absl::Status s = (*stream)->Next(&batch);
      if (absl::IsOutOfRange(s)) break;
      ASSERT_TRUE(s.ok()) << s;
      for (int64_t k = 0; k < batch.size(); ++k) {
        const int64_t x = static_cast<int64_t>(batch.dense[k]);
        EXPECT_EQ(batch.labels[k], x % 2);
        EXPECT_EQ(batch.sparse[0].values[k],
                  static_cast<uint64_t>(HashBucketFast(absl::StrCat("t", x % 5), 1000)));
        seen.insert(x);
      }
      examples += batch.size();
      batches.push_back(batch.dense);
    }
    EXPECT_GT(batches.size(), 5u);
    // Resumed at each saved position: the same batches from there.
    for (size_t b : {size_t{3}, size_t{5}, batches.size() - 2}) {
      absl::StatusOr<InputPosition> at = InputPosition::FromString(positions[b]);
      ASSERT_TRUE(at.ok()) << at.status();
      absl::StatusOr<std::unique_ptr<ExampleStream>> resumed =
          ExampleStream::Create(Env::Default(), o, *at);
      ASSERT_TRUE(resumed.ok()) << resumed.status();
      for (size_t k = b; k < batches.size(); ++k) {
        ASSERT_TRUE((*resumed)->Next(&batch).ok()) << "batch " << k;
        EXPECT_EQ(batch.dense, batches[k]) << "replica " << replica << " from " << b;
      }
    }
  }
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_EQ(examples, 80);  // 2 epochs
  // Another file with the columns in another order.
  WriteFile(dir_ + "/b.csv", "y,x,note,tag\n1,1,n,t1\n");
  o.files = {dir_ + "/a.csv.gz", dir_ + "/b.csv"};
  o.replica = 0;
  o.num_replicas = 1;
  absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::Status s;
  Dataset batch;
  for (int i = 0; i < 100 && s.ok(); ++i) s = (*stream)->Next(&batch);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  // (Whichever of the two the epoch's order opens first sets the header.)
  EXPECT_NE(s.message().find("differs from that of"), std::string::npos) << s;
  EXPECT_NE(s.message().find("\"y,x,note,tag\""), std::string::npos) << s;
  EXPECT_NE(s.message().find("\"x,note,y,tag\""), std::string::npos) << s;
  // Records that give no example (blank lines, `missing: skip`) are not
  // examples: a replica whose share holds none says so instead of waiting.
  WriteFile(dir_ + "/empty.csv", "x,note,y,tag\n\n,n,1,t1\n\n");
  o.files = {dir_ + "/empty.csv"};
  o.csv->missing = CsvMissing::kSkip;
  o.num_epochs = 0;
  stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  s = (*stream)->Next(&batch);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("read no example"), std::string::npos) << s;
  // A quote that never closes: the rest of the file is damaged.
  std::string open_quote = "x,note,y,tag\n1,\"never closed,1,t1\n";
  for (int i = 0; i < 40000; ++i) open_quote += "2,some text of a line,0,t2\n";
  WriteFile(dir_ + "/open.csv", open_quote);
  o.files = {dir_ + "/open.csv"};
  o.num_epochs = 1;
  stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  s = (*stream)->Next(&batch);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("quoted field not closed"), std::string::npos) << s;
}

TEST_F(ExampleStreamTest, AFileThatIsGoneAndBadOptionsAreNamed) {
  ExampleStreamOptions o = Options({dir_ + "/gone.tfrecord"});
  absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Dataset batch;
  absl::Status s = (*stream)->Next(&batch);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("gone.tfrecord"), std::string::npos) << s;
  o.batch_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(ExampleStream::Create(Env::Default(), o).status()));
  o = Options({});
  EXPECT_TRUE(absl::IsInvalidArgument(ExampleStream::Create(Env::Default(), o).status()));
  EXPECT_FALSE(InputPosition::FromString("epoch=1 next_file=x").ok());
  EXPECT_FALSE(InputPosition::FromString("epoch=1 next_file=0 window=0 taken=0 open=1:2").ok());
}

// A replica restarted past the end of its input (its input had ended; the
// job went on): its source has ended, no error. Labels outside the model's
// classes are an error naming them.
TEST_F(ExampleStreamTest, StreamedBatchesStartedPastTheEndHaveEndedAndLabelsAreChecked) {
  ExampleStreamOptions o = Options(WriteExampleFiles(dir_, 2, 10, false));  // 20 examples
  o.num_epochs = 1;
  o.features.sparse = {"ids"};
  std::vector<float> dense(3);
  std::vector<float> labels(3);
  SparseBatch sparse;
  for (int64_t first : {6, 7, 50}) {  // 6 whole batches of 3; then 2 examples
    absl::StatusOr<std::unique_ptr<StreamedBatches>> b =
        StreamedBatches::Start(Env::Default(), o, {"ids"}, first, nullptr);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(absl::IsOutOfRange((*b)->NextBatch(dense.data(), labels.data(), &sparse)))
        << "from batch " << first;
  }
  {  // 18 examples: the stream ends with a whole batch
    const std::string even = testing_util::TempDirRemovedAtExit("example_stream_even");
    ExampleStreamOptions e = o;
    e.files = WriteExampleFiles(even, 2, 9, false);
    absl::StatusOr<std::unique_ptr<StreamedBatches>> b =
        StreamedBatches::Start(Env::Default(), e, {"ids"}, 8, nullptr);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(absl::IsOutOfRange((*b)->NextBatch(dense.data(), labels.data(), &sparse)));
  }
  absl::StatusOr<std::unique_ptr<StreamedBatches>> b =
      StreamedBatches::Start(Env::Default(), o, {"ids"}, 5, nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->NextBatch(dense.data(), labels.data(), &sparse).ok());
  // Labels are id % 2: a model of one class refuses the 1s.
  b = StreamedBatches::Start(Env::Default(), o, {"ids"}, 0, nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  (*b)->set_label_classes({1});
  absl::Status s;
  for (int i = 0; i < 7 && s.ok(); ++i) s = (*b)->NextBatch(dense.data(), labels.data(), &sparse);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("a label of 1"), std::string::npos) << s;
}

TEST_F(ExampleStreamTest, StreamedBatchesGoOnFromTheLoggedPositionOfAnyBatch) {
  ExampleStreamOptions o = Options(WriteExampleFiles(dir_, 3, 17, true));
  o.features.sparse = {"ids"};
  const std::string path = dir_ + "/replica-0.txt";
  const uint64_t fingerprint = StreamFingerprint(o);
  std::vector<std::vector<int64_t>> want;
  {
    InputPositionLog log(Env::Default(), path, fingerprint, /*every=*/5);
    absl::StatusOr<std::unique_ptr<StreamedBatches>> b =
        StreamedBatches::Start(Env::Default(), o, {"ids"}, 0, &log);
    ASSERT_TRUE(b.ok()) << b.status();
    std::vector<float> dense(3);
    std::vector<float> labels(3);
    SparseBatch sparse;
    for (int i = 0; i < 23; ++i) {
      ASSERT_TRUE((*b)->NextBatch(dense.data(), labels.data(), &sparse).ok());
      want.push_back({static_cast<int64_t>(dense[0]), static_cast<int64_t>(dense[1]),
                      static_cast<int64_t>(dense[2])});
      EXPECT_EQ(sparse.features.size(), 1u);
      EXPECT_EQ(sparse.features[0].values[0], static_cast<uint64_t>(dense[0]));
    }
  }
  // A restarted replica: batch 17 from the position of batch 15 and two read past.
  InputPositionLog log(Env::Default(), path, fingerprint, 5);
  std::string note;
  ASSERT_TRUE(log.Load(&note).ok());
  EXPECT_EQ(note, "");
  ASSERT_TRUE(log.Find(17).has_value());
  EXPECT_EQ(log.Find(17)->first, 15);
  absl::StatusOr<std::unique_ptr<StreamedBatches>> b =
      StreamedBatches::Start(Env::Default(), o, {"ids"}, 17, &log);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<float> dense(3);
  std::vector<float> labels(3);
  for (int i = 17; i < 23; ++i) {
    ASSERT_TRUE((*b)->NextBatch(dense.data(), labels.data(), nullptr).ok());
    EXPECT_EQ(want[i],
              (std::vector<int64_t>{static_cast<int64_t>(dense[0]), static_cast<int64_t>(dense[1]),
                                    static_cast<int64_t>(dense[2])}))
        << "batch " << i;
  }
  // A rollback to batch 10 drops what came after it.
  ASSERT_TRUE(log.Record(10, InputPosition()).ok());
  EXPECT_EQ(log.Find(22)->first, 10);
  // Other options (another seed): the file is not used, and says so.
  o.seed = 7;
  InputPositionLog other(Env::Default(), path, StreamFingerprint(o), 5);
  ASSERT_TRUE(other.Load(&note).ok());
  EXPECT_NE(note.find("other input settings"), std::string::npos) << note;
  EXPECT_FALSE(other.Find(100).has_value());
  // A damaged file is named.
  WriteFile(path, absl::StrCat("pstrain input positions v1 ", fingerprint, "\n5 epoch=x\n"));
  InputPositionLog damaged(Env::Default(), path, fingerprint, 5);
  absl::Status s = damaged.Load(&note);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("replica-0.txt: line 2"), std::string::npos) << s;
}

TEST_F(ExampleStreamTest, EachWindowGoesOnWithTheFileWhoseTurnItIs) {
  // Windows of one example over 2 files: the files still alternate.
  ExampleStreamOptions o = Options(WriteExampleFiles(dir_, 2, 10, false));
  o.shuffle_buffer = 1;
  o.batch_size = 1;
  o.num_epochs = 1;
  absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<std::vector<int64_t>> batches = Drain(**stream);
  ASSERT_EQ(batches.size(), 20u);
  for (size_t i = 1; i < batches.size(); ++i) {
    EXPECT_NE(batches[i][0] / 10, batches[i - 1][0] / 10) << "example " << i;
  }
}

TEST_F(ExampleStreamTest, AReplicaWithoutExamplesFailsInsteadOfWaiting) {
  // 2 files for 2 replicas, the second empty (as a job writing shards may
  // leave one): replica 1 has nothing to train on, and says so.
  std::vector<std::string> files = WriteExampleFiles(dir_, 1, 5, false);
  WriteFile(dir_ + "/train-1-of-2.tfrecord", "");
  files.push_back(dir_ + "/train-1-of-2.tfrecord");
  ExampleStreamOptions o = Options(files);
  o.replica = 1;
  o.num_replicas = 2;
  absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Dataset batch;
  absl::Status s = (*stream)->Next(&batch);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("replica 1 of 2 read no example"), std::string::npos) << s;
  // A TSV file whose last line has no line end is read to its end.
  WriteFile(dir_ + "/last.tsv", absl::StrCat("1\t5", std::string(12, '\t'), std::string(26, '\t')));
  o = Options({dir_ + "/last.tsv"});
  o.format = ExampleFormat::kCriteoTsv;
  o.batch_size = 1;
  o.num_epochs = 1;
  stream = ExampleStream::Create(Env::Default(), o);
  ASSERT_TRUE(stream.ok());
  s = (*stream)->Next(&batch);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(batch.labels, std::vector<float>{1});
}

}  // namespace
}  // namespace pstrain
