// pstrain-data's usage text, and the failure every subcommand reports.
#include <cstdio>
#include <string>

#include "data/tool/commands.h"

namespace pstrain::data_tool {

int Usage() {
  std::fprintf(stderr,
               "usage: pstrain-data convert <input dir> <output dir>\n"
               "         MNIST idx files -> train.tfrecords, test.tfrecords\n"
               "         CIFAR-10 binary batches -> train.tfrecords (batches 1-4),\n"
               "         validation.tfrecords (batch 5), eval.tfrecords (test batch)\n"
               "       pstrain-data convert PATTERN --out PREFIX [--shards N] [--csv_schema FILE]\n"
               "           [--label_type int64|float]\n"
               "         Criteo TSV (.tsv[.gz]) or CSV (.csv[.gz], read by the schema) ->\n"
               "         PREFIX-00000-of-0000N.tfrecord.gz ...: gzip'd TFRecords of\n"
               "         tf.train.Example (label, dense, one feature per categorical\n"
               "         column), example i in shard i %% N (default 1); a CSV label as\n"
               "         an int64 class id (the default) or a float (a regression head's)\n"
               "       pstrain-data describe <file.tfrecords> ...\n"
               "         record count, feature names, types and sizes; verifies checksums\n"
               "       pstrain-data instances <data dir> <count>\n"
               "         the first <count> test examples as prediction instances, one JSON\n"
               "         list of pixel / 255 per line (pstrain-predict --json_instances);\n"
               "         their labels on stderr\n"
               "       pstrain-data synthetic-ctr --out FILE --examples N [--seed S]\n"
               "           [--test_out FILE] [--test_examples M] [--shards N] [--gzip]\n"
               "         a synthetic click dataset in Criteo TSV (default config of\n"
               "         data/synthetic/synthetic_ctr.h): N training examples to FILE, M (default\n"
               "         100000) test examples to --test_out if given, and the planted\n"
               "         model's AUC and log loss on the test examples, the best attainable;\n"
               "         with --shards or --gzip the training examples go to N files\n"
               "         FILE-00000-of-0000N.tsv[.gz] (FILE without its .tsv); with --days\n"
               "         D [--day_shift P] to D files FILE-day-00000.tsv[.gz], ..., a log\n"
               "         partitioned by day whose model moves from day to day (each id\n"
               "         with probability P, default 0.2, has a weight of that day's own);\n"
               "         the test examples are from the base model (no day's own weights)\n"
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
               "         user histories and candidates (data/synthetic/synthetic_seq.h) whose\n"
               "         click depends on the candidate's category matching the last items:\n"
               "         DIR/train.tfrecords, DIR/test.tfrecords of tf.train.Example\n"
               "         (label, hist, hist_cat, cand, cand_cat), and the planted model's\n"
               "         AUC and log loss on the test examples\n"
               "       pstrain-data synthetic-multitask --out DIR --examples N\n"
               "           [--test_examples M] [--seed S] [--users U] [--items I]\n"
               "         a shop's impressions with three labels (click, convert, dwell;\n"
               "         data/synthetic/synthetic_multitask.h) as DIR/train.csv and\n"
               "         DIR/test.csv (columns user,item,price,hour,click,convert,dwell),\n"
               "         and the planted models' AUCs and RMSE on the test rows\n"
               "       pstrain-data read PATTERN [--batch_size N] [--shuffle_buffer N]\n"
               "           [--num_dense N] [--sparse a,b,...] [--labels a,b,...]\n"
               "         streams the files once as a training replica does (TFRecord\n"
               "         Examples, or Criteo TSV for .tsv/.tsv.gz; gzip by .gz) and prints\n"
               "         the input pipeline's rate alone: MB/s of the files and of their\n"
               "         decompressed records, examples/s\n");
  return 2;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pstrain-data: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace pstrain::data_tool
