// pstrain-data: converts MNIST idx and CIFAR-10 binary data to TFRecord files
// of tf.train.Example (the layouts of TensorFlow's create_records.py and
// generate_cifar10_tfrecords.py), and describes any such file.
//   pstrain-data convert <input dir> <output dir>
//   pstrain-data convert PATTERN --out PREFIX [--shards N] [--csv_schema FILE]
//   pstrain-data describe <file.tfrecords> ...
//   pstrain-data instances <data dir> <count>
//   pstrain-data read PATTERN [--batch_size N] [--shuffle_buffer N] [--num_dense N] [--sparse a,b]
//   pstrain-data synthetic-ctr --out FILE --examples N [--seed S] [--test_out FILE]
//       [--test_examples M]
//   pstrain-data synthetic-ctr --stream DIR --examples N --every SECS [--drift D] [--count K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "data/convert.h"
#include "data/criteo.h"
#include "data/csv_format.h"
#include "data/example_format.h"
#include "data/example_stream.h"
#include "data/example_writer.h"
#include "data/file_pattern.h"
#include "data/gzip.h"
#include "data/load.h"
#include "data/record_stream.h"
#include "data/synthetic_ctr.h"
#include "data/synthetic_seq.h"
#include "data/tfrecord_dataset.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: pstrain-data convert <input dir> <output dir>\n"
               "         MNIST idx files -> train.tfrecords, test.tfrecords\n"
               "         CIFAR-10 binary batches -> train.tfrecords (batches 1-4),\n"
               "         validation.tfrecords (batch 5), eval.tfrecords (test batch)\n"
               "       pstrain-data convert PATTERN --out PREFIX [--shards N] [--csv_schema FILE]\n"
               "         Criteo TSV (.tsv[.gz]) or CSV (.csv[.gz], read by the schema) ->\n"
               "         PREFIX-00000-of-0000N.tfrecord.gz ...: gzip'd TFRecords of\n"
               "         tf.train.Example (label, dense, one feature per categorical\n"
               "         column), example i in shard i %% N (default 1)\n"
               "       pstrain-data describe <file.tfrecords> ...\n"
               "         record count, feature names, types and sizes; verifies checksums\n"
               "       pstrain-data instances <data dir> <count>\n"
               "         the first <count> test examples as prediction instances, one JSON\n"
               "         list of pixel / 255 per line (pstrain-predict --json_instances);\n"
               "         their labels on stderr\n"
               "       pstrain-data synthetic-ctr --out FILE --examples N [--seed S]\n"
               "           [--test_out FILE] [--test_examples M] [--shards N] [--gzip]\n"
               "         a synthetic click dataset in Criteo TSV (default config of\n"
               "         data/synthetic_ctr.h): N training examples to FILE, M (default\n"
               "         100000) test examples to --test_out if given, and the planted\n"
               "         model's AUC and log loss on the test examples, the best attainable;\n"
               "         with --shards or --gzip the training examples go to N files\n"
               "         FILE-00000-of-0000N.tsv[.gz] (FILE without its .tsv)\n"
               "       pstrain-data synthetic-ctr --stream DIR --examples N --every SECS\n"
               "           [--drift D] [--count K] [--seed S] [--gzip]\n"
               "         a click log that grows, for online training: every SECS seconds\n"
               "         a new file DIR/part-00000.tsv[.gz], ... of N examples (K files,\n"
               "         default for ever), from a planted model in which a fraction D of\n"
               "         the ids draw new weights at each file; prints each file's planted\n"
               "         AUC and that of the first file's model on it\n"
               "       pstrain-data synthetic-seq --out DIR --examples N [--test_examples M]\n"
               "           [--seed S] [--items V] [--categories C] [--max_history L]\n"
               "           [--item_stddev X]\n"
               "         user histories and candidates (data/synthetic_seq.h) whose click\n"
               "         depends on the candidate's category matching the last items:\n"
               "         DIR/train.tfrecords, DIR/test.tfrecords of tf.train.Example\n"
               "         (label, hist, hist_cat, cand, cand_cat), and the planted model's\n"
               "         AUC and log loss on the test examples\n"
               "       pstrain-data read PATTERN [--batch_size N] [--shuffle_buffer N]\n"
               "           [--num_dense N] [--sparse a,b,...]\n"
               "         streams the files once as a training replica does (TFRecord\n"
               "         Examples, or Criteo TSV for .tsv/.tsv.gz; gzip by .gz) and prints\n"
               "         the input pipeline's rate alone: MB/s of the files and of their\n"
               "         decompressed records, examples/s\n");
  return 2;
}

// The first `count` test examples as JSON instance lines.
int Instances(pstrain::Env* env, const std::string& dir, const std::string& count_text) {
  int64_t count = 0;
  if (!absl::SimpleAtoi(count_text, &count) || count < 1) return Usage();
  absl::StatusOr<pstrain::Dataset> test = pstrain::LoadDataset(env, dir, pstrain::Split::kTest);
  if (!test.ok()) {
    std::fprintf(stderr, "pstrain-data: %s\n", std::string(test.status().message()).c_str());
    return 1;
  }
  count = std::min(count, test->size());
  std::string labels;
  for (int64_t i = 0; i < count; ++i) {
    std::string line = "[";
    for (int64_t k = 0; k < test->example_size(); ++k) {
      const int pixel = test->images[i * test->example_size() + k];
      absl::StrAppend(&line, k ? "," : "", absl::StrFormat("%.4g", pixel / 255.0));
    }
    std::printf("%s]\n", line.c_str());
    absl::StrAppend(&labels, i ? " " : "", test->labels[i]);
  }
  std::fprintf(stderr, "labels: %s\n", labels.c_str());
  return 0;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pstrain-data: %s\n", std::string(s.message()).c_str());
  return 1;
}

// The next `n` examples of `examples` as Criteo TSV in `path` (gzip'd if
// `gzip`), an AtomicWritableFile: whole or not there. Its temp file is
// hidden, so a follower's pattern never matches half a file.
absl::Status WriteTsvFile(pstrain::Env* env, pstrain::SyntheticCtr::Stream& examples, int64_t n,
                          const std::string& path, bool gzip) {
  pstrain::CriteoBatch batch;
  std::string text;
  absl::StatusOr<std::unique_ptr<pstrain::AtomicWritableFile>> file =
      env->NewAtomicWritableFile(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<pstrain::GzipWriter> zipped;
  if (gzip) zipped = std::make_unique<pstrain::GzipWriter>(file->get(), path);
  for (int64_t done = 0; done < n;) {
    const int64_t take = std::min<int64_t>(1 << 14, n - done);
    examples.Next(take, &batch);
    text.clear();
    for (int64_t row = 0; row < batch.size(); ++row) pstrain::AppendCriteoLine(batch, row, &text);
    absl::Status st = gzip ? zipped->Append(text) : (*file)->Append(text);
    if (!st.ok()) return st;
    done += take;
  }
  if (gzip) {
    if (absl::Status st = zipped->Close(); !st.ok()) return st;
  }
  return (*file)->Commit();
}

// The first `n` training examples of `generator` in `shards` files
// <prefix>-00000-of-0000N.tsv[.gz], in order (shard i holds examples
// [i n / shards, (i + 1) n / shards)); each file whole or not there.
absl::Status WriteShards(pstrain::Env* env, const pstrain::SyntheticCtr& generator,
                         const std::string& prefix, int64_t n, int shards, bool gzip) {
  pstrain::SyntheticCtr::Stream examples = generator.NewStream(pstrain::kSyntheticTrainStream);
  for (int s = 0; s < shards; ++s) {
    const std::string path =
        absl::StrFormat("%s-%05d-of-%05d.tsv%s", prefix, s, shards, gzip ? ".gz" : "");
    const int64_t begin = n * s / shards, end = n * (s + 1) / shards;
    if (absl::Status st = WriteTsvFile(env, examples, end - begin, path, gzip); !st.ok()) {
      return st;
    }
    std::fprintf(stderr, "wrote %s: %lld examples\n", path.c_str(),
                 static_cast<long long>(end - begin));
  }
  return absl::OkStatus();
}

// --stream: file k of a drifting click log every `every` seconds.
int WriteSyntheticStream(pstrain::Env* env, pstrain::SyntheticCtr generator, const std::string& dir,
                         int64_t examples, double every, double drift, int64_t count, bool gzip) {
  if (absl::Status s = env->CreateDirs(dir); !s.ok()) return Fail(s);
  pstrain::SyntheticCtr first = generator;
  first.SetDrift(drift, 0);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t k = 0; count == 0 || k < count; ++k) {
    generator.SetDrift(drift, k);
    const uint64_t stream = 1000 + static_cast<uint64_t>(k);
    const std::string name = absl::StrFormat("part-%05d.tsv%s", k, gzip ? ".gz" : "");
    const std::string path = pstrain::JoinPath(dir, name);
    // Written under a hidden temp name no pattern matches, then committed:
    // a follower never sees half a file.
    pstrain::SyntheticCtr::Stream source = generator.NewStream(stream);
    if (absl::Status s = WriteTsvFile(env, source, examples, path, gzip); !s.ok()) {
      return Fail(s);
    }
    const pstrain::CriteoBatch batch = generator.Generate(examples, stream);
    absl::StatusOr<pstrain::PlantedModelQuality> now = generator.Evaluate(batch);
    absl::StatusOr<pstrain::PlantedModelQuality> then = first.Evaluate(batch);
    if (!now.ok()) return Fail(now.status());
    if (!then.ok()) return Fail(then.status());
    std::printf(
        "shard %lld: %lld examples to %s; planted AUC %.4f (the first shard's model: %.4f)\n",
        static_cast<long long>(k), static_cast<long long>(examples), path.c_str(), now->auc,
        then->auc);
    std::fflush(stdout);
    if (count != 0 && k + 1 == count) break;
    std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::duration<double>(every * (k + 1))));
  }
  return 0;
}

// pstrain-data synthetic-seq: train.tfrecords and test.tfrecords of user
// histories (data/synthetic_seq.h) in DIR, and the planted model's AUC.
int WriteSyntheticSeq(pstrain::Env* env, int argc, char** argv) {
  std::string out;
  int64_t examples = -1, test_examples = 100000;
  pstrain::SyntheticSeqConfig config;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return Usage();
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--out") {
      out = value;
    } else if (flag == "--examples") {
      ok = absl::SimpleAtoi(value, &examples) && examples >= 1;
    } else if (flag == "--test_examples") {
      ok = absl::SimpleAtoi(value, &test_examples) && test_examples >= 2;
    } else if (flag == "--seed") {
      ok = absl::SimpleAtoi(value, &config.seed);
    } else if (flag == "--items") {
      ok = absl::SimpleAtoi(value, &config.items);
    } else if (flag == "--categories") {
      ok = absl::SimpleAtoi(value, &config.categories);
    } else if (flag == "--max_history") {
      ok = absl::SimpleAtoi(value, &config.max_history);
    } else if (flag == "--item_stddev") {
      ok = absl::SimpleAtod(value, &config.item_stddev);
    } else {
      ok = false;
    }
    if (!ok) return Usage();
  }
  if (out.empty() || examples < 1) return Usage();
  absl::StatusOr<pstrain::SyntheticSeq> generator = pstrain::SyntheticSeq::Create(config);
  if (!generator.ok()) return Fail(generator.status());
  if (absl::Status s = env->CreateDirs(out); !s.ok()) return Fail(s);
  const std::vector<pstrain::SeqExample> train =
      generator->Generate(examples, pstrain::kSyntheticTrainStream);
  if (absl::Status s = generator->WriteTfRecords(env, out + "/train.tfrecords", train); !s.ok()) {
    return Fail(s);
  }
  const std::vector<pstrain::SeqExample> test =
      generator->Generate(test_examples, pstrain::kSyntheticTestStream);
  if (absl::Status s = generator->WriteTfRecords(env, out + "/test.tfrecords", test); !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<pstrain::SeqQuality> q = pstrain::SyntheticSeq::Evaluate(test);
  if (!q.ok()) return Fail(q.status());
  std::printf(
      "wrote %lld training and %lld test examples to %s/{train,test}.tfrecords\n"
      "planted model on the test examples: auc = %.4f, log loss = %.4f, click rate = %.4f\n",
      static_cast<long long>(examples), static_cast<long long>(test_examples), out.c_str(), q->auc,
      q->log_loss, q->base_rate);
  return 0;
}

int WriteSyntheticCtr(pstrain::Env* env, int argc, char** argv) {
  std::string out, test_out, stream_dir;
  int64_t examples = -1, test_examples = 100000;
  int64_t shards = 0, count = 0;
  double every = -1, drift = 0;
  bool gzip = false;
  pstrain::SyntheticCtrConfig config;
  for (int i = 2; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--gzip") == 0) {
      gzip = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) return Usage();
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--out") {
      out = value;
    } else if (flag == "--test_out") {
      test_out = value;
    } else if (flag == "--examples") {
      ok = absl::SimpleAtoi(value, &examples) && examples >= 0;
    } else if (flag == "--test_examples") {
      ok = absl::SimpleAtoi(value, &test_examples) && test_examples >= 2;
    } else if (flag == "--seed") {
      ok = absl::SimpleAtoi(value, &config.seed);
    } else if (flag == "--shards") {
      ok = absl::SimpleAtoi(value, &shards) && shards >= 1 && shards <= 99999;
    } else if (flag == "--stream") {
      stream_dir = value;
    } else if (flag == "--every") {
      ok = absl::SimpleAtod(value, &every) && every >= 0;
    } else if (flag == "--drift") {
      ok = absl::SimpleAtod(value, &drift) && drift >= 0 && drift <= 1;
    } else if (flag == "--count") {
      ok = absl::SimpleAtoi(value, &count) && count >= 0 && count <= 99999;
    } else {
      ok = false;
    }
    if (!ok) return Usage();
  }
  if (!stream_dir.empty()) {
    if (examples < 2 || every < 0 || !out.empty() || shards > 0) return Usage();
    absl::StatusOr<pstrain::SyntheticCtr> generator = pstrain::SyntheticCtr::Create(config);
    if (!generator.ok()) return Fail(generator.status());
    return WriteSyntheticStream(env, *std::move(generator), stream_dir, examples, every, drift,
                                count, gzip);
  }
  if (out.empty() || examples < 0) return Usage();
  absl::StatusOr<pstrain::SyntheticCtr> generator = pstrain::SyntheticCtr::Create(config);
  absl::Status status = generator.status();
  std::string where = out;
  if (status.ok() && (shards > 0 || gzip)) {
    std::string prefix = out;
    if (absl::EndsWith(prefix, ".tsv")) prefix.resize(prefix.size() - 4);
    where = absl::StrFormat("%s-*-of-%05d.tsv%s", prefix, std::max<int64_t>(shards, 1),
                            gzip ? ".gz" : "");
    status = WriteShards(env, *generator, prefix, examples,
                         static_cast<int>(std::max<int64_t>(shards, 1)), gzip);
  } else if (status.ok()) {
    status = generator->WriteTsv(env, out, examples, pstrain::kSyntheticTrainStream);
  }
  if (status.ok() && !test_out.empty()) {
    status = generator->WriteTsv(env, test_out, test_examples, pstrain::kSyntheticTestStream);
  }
  absl::StatusOr<pstrain::PlantedModelQuality> quality =
      status.ok()
          ? generator->Evaluate(generator->Generate(test_examples, pstrain::kSyntheticTestStream))
          : status;
  if (!quality.ok()) {
    std::fprintf(stderr, "pstrain-data: %s\n", std::string(quality.status().message()).c_str());
    return 1;
  }
  std::printf(
      "wrote %lld examples to %s (seed %llu)\n"
      "planted model on %lld test examples: AUC %.4f, log loss %.4f; base rate %.4f, its log "
      "loss %.4f\n",
      static_cast<long long>(examples), where.c_str(), static_cast<unsigned long long>(config.seed),
      static_cast<long long>(quality->examples), quality->auc, quality->log_loss,
      quality->base_rate, quality->base_rate_log_loss);
  return 0;
}

// Criteo TSV or CSV files -> sharded gzip'd TFRecords of tf.train.Example.
int ConvertExamples(pstrain::Env* env, int argc, char** argv) {
  const std::string pattern = argv[2];
  std::string out, schema_path;
  int64_t shards = 1;
  for (int i = 3; i < argc; i += 2) {
    if (i + 1 >= argc) return Usage();
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--out") {
      out = value;
    } else if (flag == "--csv_schema") {
      schema_path = value;
    } else if (flag != "--shards" || !absl::SimpleAtoi(value, &shards) || shards < 1 ||
               shards > 99999) {
      return Usage();
    }
  }
  if (out.empty()) return Usage();
  absl::StatusOr<std::vector<std::string>> files =
      pstrain::ExpandFilePatterns(env, pattern, "pstrain-data convert");
  if (!files.ok()) return Fail(files.status());
  absl::StatusOr<pstrain::ExampleFormat> format =
      pstrain::ExampleFormatOfFiles(*files, "pstrain-data convert");
  if (!format.ok()) return Fail(format.status());
  const bool criteo = *format == pstrain::ExampleFormat::kCriteoTsv;
  const bool csv = *format == pstrain::ExampleFormat::kCsv;
  if (!criteo && !csv) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(pattern,
                     ": convert reads Criteo TSV (.tsv, .tsv.gz) or CSV (.csv, .csv.gz) "
                     "files, all of one kind")));
  }
  if (csv && schema_path.empty()) {
    return Fail(absl::InvalidArgumentError(
        "CSV files are read by a schema: give --csv_schema FILE (docs/data-formats.md)"));
  }
  absl::StatusOr<std::unique_ptr<pstrain::ShardedExampleWriter>> writer =
      pstrain::ShardedExampleWriter::Create(env, out, static_cast<int>(shards));
  if (!writer.ok()) return Fail(writer.status());
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  const auto progress = [&](size_t file) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(2)) return;
    last = now;
    std::fprintf(stderr, "convert: file %zu of %zu, %lld examples, %.0f examples/s\n", file + 1,
                 files->size(), static_cast<long long>((*writer)->examples()),
                 (*writer)->examples() / std::chrono::duration<double>(now - start).count());
  };
  if (criteo) {
    pstrain::CriteoBatch batch;
    const auto flush = [&]() -> absl::Status {
      for (int64_t row = 0; row < batch.size(); ++row) {
        if (absl::Status s = (*writer)->Add(pstrain::EncodeCriteoExample(batch, row)); !s.ok()) {
          return s;
        }
      }
      batch.Clear();
      return absl::OkStatus();
    };
    for (size_t f = 0; f < files->size(); ++f) {
      const std::string& path = (*files)[f];
      absl::StatusOr<std::unique_ptr<pstrain::RecordStream>> lines = pstrain::RecordStream::Open(
          env, path, pstrain::Compression::kAuto, pstrain::RecordFraming::kLines);
      if (!lines.ok()) return Fail(lines.status());
      (*lines)->AcceptUnterminatedLastLine();
      while (true) {
        const int64_t line = (*lines)->record() + 1;
        absl::StatusOr<std::string_view> text = (*lines)->Next();
        if (absl::IsOutOfRange(text.status())) break;
        if (!text.ok()) return Fail(text.status());
        if (absl::Status s = pstrain::ParseCriteoLine(*text, &batch); !s.ok()) {
          return Fail(absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", s.message())));
        }
        if (batch.size() >= 4096) {
          if (absl::Status s = flush(); !s.ok()) return Fail(s);
          progress(f);
        }
      }
      if (absl::Status s = flush(); !s.ok()) return Fail(s);
    }
  } else {
    absl::StatusOr<pstrain::CsvSchema> schema = pstrain::LoadCsvSchema(env, schema_path);
    if (!schema.ok()) return Fail(schema.status());
    pstrain::ExampleStreamOptions o;
    o.files = *files;
    o.format = pstrain::ExampleFormat::kCsv;
    o.csv = *schema;
    o.batch_size = 4096;
    o.cycle_length = 1;  // file after file, in order
    o.num_epochs = 1;
    absl::StatusOr<std::unique_ptr<pstrain::ExampleStream>> stream =
        pstrain::ExampleStream::Create(env, o);
    if (!stream.ok()) return Fail(stream.status());
    pstrain::Dataset batch;
    while (true) {
      absl::Status s = (*stream)->Next(&batch);
      if (absl::IsOutOfRange(s)) break;
      if (!s.ok()) return Fail(s);
      for (int64_t i = 0; i < batch.size(); ++i) {
        absl::StatusOr<std::string> example = pstrain::EncodeTabularExample(batch, i);
        if (!example.ok()) return Fail(example.status());
        if (absl::Status a = (*writer)->Add(*example); !a.ok()) return Fail(a);
      }
      progress(static_cast<size_t>((*stream)->progress().files_done));
    }
  }
  if (absl::Status s = (*writer)->Close(); !s.ok()) return Fail(s);
  uint64_t bytes = 0;
  for (const std::string& path : (*writer)->paths()) {
    absl::StatusOr<uint64_t> size = env->FileSize(path);
    if (size.ok()) bytes += *size;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %lld examples from %zu files to %s (%lld files, %.1f MB) in %.1f s\n",
              static_cast<long long>((*writer)->examples()), files->size(),
              absl::StrFormat("%s-*-of-%05d.tfrecord.gz", out, shards).c_str(),
              static_cast<long long>(shards), bytes / 1e6, secs);
  return 0;
}

// Streams PATTERN once through ExampleStream, printing progress every 2 s
// and the rate at the end.
int Read(pstrain::Env* env, int argc, char** argv) {
  if (argc < 3) return Usage();
  pstrain::ExampleStreamOptions o;
  absl::StatusOr<std::vector<std::string>> files =
      pstrain::ExpandFilePatterns(env, argv[2], "pstrain-data read");
  if (!files.ok()) {
    std::fprintf(stderr, "pstrain-data: %s\n", std::string(files.status().message()).c_str());
    return 1;
  }
  o.files = *files;
  absl::StatusOr<pstrain::ExampleFormat> format =
      pstrain::ExampleFormatOfFiles(o.files, "pstrain-data read");
  if (format.ok() && *format == pstrain::ExampleFormat::kCsv) {
    format = absl::InvalidArgumentError(absl::StrCat(
        "pstrain-data read: ", o.files[0],
        " is CSV, read by a schema, which read does not take: convert the files "
        "(pstrain-data convert PATTERN --csv_schema FILE --out PREFIX) and read those"));
  }
  if (!format.ok()) {
    std::fprintf(stderr, "pstrain-data: %s\n", std::string(format.status().message()).c_str());
    return 1;
  }
  o.format = *format;
  o.batch_size = 256;
  o.shuffle_buffer = 10000;
  o.num_epochs = 1;
  for (int i = 3; i < argc; i += 2) {
    if (i + 1 >= argc) return Usage();
    const std::string flag = argv[i], value = argv[i + 1];
    int64_t n = 0;
    if (flag == "--sparse") {
      o.features.sparse = absl::StrSplit(value, ',', absl::SkipEmpty());
      continue;
    }
    if (!absl::SimpleAtoi(value, &n) || n < 0) return Usage();
    if (flag == "--batch_size") {
      o.batch_size = static_cast<int>(n);
    } else if (flag == "--shuffle_buffer") {
      o.shuffle_buffer = n;
    } else if (flag == "--num_dense") {
      o.features.num_dense = n;
    } else {
      return Usage();
    }
  }
  absl::StatusOr<std::unique_ptr<pstrain::ExampleStream>> stream =
      pstrain::ExampleStream::Create(env, o);
  if (!stream.ok()) {
    std::fprintf(stderr, "pstrain-data: %s\n", std::string(stream.status().message()).c_str());
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  pstrain::Dataset batch;
  while (true) {
    absl::Status s = (*stream)->Next(&batch);
    if (absl::IsOutOfRange(s)) break;
    if (!s.ok()) {
      std::fprintf(stderr, "pstrain-data: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last > std::chrono::seconds(2)) {
      last = now;
      const pstrain::InputProgress p = (*stream)->progress();
      const double secs = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "input: epoch %lld, file %lld of %lld, %.1f MB/s\n",
                   static_cast<long long>(p.epoch), static_cast<long long>(p.files_done + 1),
                   static_cast<long long>(p.files), p.file_bytes / 1e6 / secs);
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const pstrain::InputProgress p = (*stream)->progress();
  std::printf(
      "%lld examples from %zu files in %.2f s: %.1f MB/s of files (%.1f MB), %.1f MB/s of "
      "records (%.1f MB decompressed), %.0f examples/s\n",
      static_cast<long long>(p.examples), o.files.size(), secs, p.file_bytes / 1e6 / secs,
      p.file_bytes / 1e6, p.bytes / 1e6 / secs, p.bytes / 1e6, p.examples / secs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-data")) return 0;
  pstrain::Env* env = pstrain::ProcessEnv();
  if (argc >= 4 && std::strcmp(argv[1], "convert") == 0 && absl::StartsWith(argv[3], "--")) {
    return ConvertExamples(env, argc, argv);
  }
  if (argc == 4 && std::strcmp(argv[1], "convert") == 0) {
    absl::StatusOr<std::vector<pstrain::ConvertedFile>> files = pstrain::ConvertToTfRecords(
        env, argv[2], argv[3],
        [](const std::string& line) { std::printf("%s\n", line.c_str()), std::fflush(stdout); });
    if (!files.ok()) {
      std::fprintf(stderr, "pstrain-data: %s\n", std::string(files.status().message()).c_str());
      return 1;
    }
    return 0;
  }
  if (argc >= 3 && std::strcmp(argv[1], "describe") == 0) {
    int rc = 0;
    for (int i = 2; i < argc; ++i) {
      absl::StatusOr<std::string> text = pstrain::DescribeExampleFile(env, argv[i]);
      if (!text.ok()) {
        std::fprintf(stderr, "pstrain-data: %s\n", std::string(text.status().message()).c_str());
        rc = 1;
        continue;
      }
      std::fputs(text->c_str(), stdout);
    }
    return rc;
  }
  if (argc == 4 && std::strcmp(argv[1], "instances") == 0) return Instances(env, argv[2], argv[3]);
  if (argc >= 2 && std::strcmp(argv[1], "read") == 0) return Read(env, argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "synthetic-ctr") == 0)
    return WriteSyntheticCtr(env, argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "synthetic-seq") == 0)
    return WriteSyntheticSeq(env, argc, argv);
  return Usage();
}
