#ifndef PSTRAIN_DATA_TOOL_COMMANDS_H_
#define PSTRAIN_DATA_TOOL_COMMANDS_H_

// pstrain-data's subcommands, one file each (<name>_command.cc); data_main.cc
// dispatches to them. Each takes the arguments after its name and returns
// the process's exit code: 0, 1 for a failure (said on stderr by Fail), 2
// for a command line it does not take (Usage).

#include <span>
#include <string>

#include "absl/status/status.h"
#include "common/env.h"

namespace pstrain::data_tool {

// convert <input dir> <output dir>: MNIST idx or CIFAR-10 binary -> TFRecords;
// convert PATTERN --out PREFIX ...: Criteo TSV or CSV -> sharded gzip'd TFRecords.
int RunConvert(Env* env, std::span<const std::string> args);
// describe <file.tfrecords> ...
int RunDescribe(Env* env, std::span<const std::string> args);
// instances <data dir> <count>
int RunInstances(Env* env, std::span<const std::string> args);
// read PATTERN [--batch_size N] ...
int RunRead(Env* env, std::span<const std::string> args);
// synthetic-ctr --out FILE ... | --stream DIR ...
int RunSyntheticCtr(Env* env, std::span<const std::string> args);
// synthetic-seq --out DIR ...
int RunSyntheticSeq(Env* env, std::span<const std::string> args);
// pstrain-data synthetic-multitask --out DIR --examples N ...
int RunSyntheticMultitask(Env* env, std::span<const std::string> args);

// Prints the usage of every subcommand to stderr; returns 2.
int Usage();
// Prints "pstrain-data: <message>" to stderr; returns 1.
int Fail(const absl::Status& s);

}  // namespace pstrain::data_tool

#endif  // PSTRAIN_DATA_TOOL_COMMANDS_H_
