#include "io/event_writer.h"

#include <regex>
#include <vector>

#include "common/record_reader.h"
#include "gtest/gtest.h"
#include "io/event_inspect.h"
#include "io/png.h"

namespace pstrain {
namespace {

std::vector<tensorboard::Event> ReadEvents(Env* env, const std::string& path) {
  std::vector<tensorboard::Event> events;
  absl::StatusOr<std::string> contents = env->ReadFile(path);
  EXPECT_TRUE(contents.ok()) << contents.status();
  RecordReader reader(*contents, path);
  while (true) {
    absl::StatusOr<std::string_view> record = reader.ReadRecord();
    if (absl::IsOutOfRange(record.status())) break;
    EXPECT_TRUE(record.ok()) << record.status();
    if (!record.ok()) break;
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromArray(record->data(), static_cast<int>(record->size())));
    events.push_back(event);
  }
  return events;
}

TEST(EventWriterTest, NameFollowsTensorFlowsPattern) {
  EXPECT_EQ(EventFileName(absl::FromUnixSeconds(1700000000), "host-1", 42, 0),
            "events.out.tfevents.1700000000.host-1.42.0");
  EXPECT_EQ(EventFileName(absl::FromUnixSeconds(5), "h", 1, 3),
            "events.out.tfevents.0000000005.h.1.3");
}

TEST(EventWriterTest, FileVersionFirstThenScalarsAndHistograms) {
  MemEnv env;
  auto writer = EventWriter::Create(&env, "/job/eval", absl::ZeroDuration());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  EXPECT_TRUE(std::regex_match(path, std::regex(R"(/job/eval/events\.out\.tfevents\.\d{10}\..+)")))
      << path;
  ASSERT_TRUE((*writer)->WriteScalar("accuracy", 100, 0.5f).ok());
  ASSERT_TRUE((*writer)->WriteScalar("loss", 200, 0.25f).ok());
  ASSERT_TRUE((*writer)->WriteHistogram("dense/kernel", 200, std::vector<float>{1, 2, 2, 3}).ok());
  writer->reset();
  std::vector<tensorboard::Event> events = ReadEvents(&env, path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.6e9);
  EXPECT_EQ(events[1].step(), 100);
  ASSERT_EQ(events[1].summary().value_size(), 1);
  EXPECT_EQ(events[1].summary().value(0).tag(), "accuracy");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 0.5f);
  EXPECT_EQ(events[2].summary().value(0).simple_value(), 0.25f);
  const tensorboard::HistogramProto& h = events[3].summary().value(0).histo();
  EXPECT_EQ(h.num(), 4);
  EXPECT_EQ(h.min(), 1);
  EXPECT_EQ(h.max(), 3);
  EXPECT_EQ(h.sum(), 8);
  EXPECT_EQ(h.sum_squares(), 18);
  double total = 0;
  for (double c : h.bucket()) total += c;
  EXPECT_EQ(total, 4);
  EXPECT_EQ(h.bucket_limit(h.bucket_limit_size() - 1), 3);
}

TEST(EventWriterTest, ImagesArePngAsTf1WritesThem) {
  MemEnv env;
  auto writer = EventWriter::Create(&env, "/job", absl::ZeroDuration());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  std::vector<uint8_t> pixels(4 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(20 * i);
  ASSERT_TRUE((*writer)->WriteImage("input_images/image/0", 7, 4, 3, 1, pixels).ok());
  EXPECT_FALSE((*writer)->WriteImage("bad", 7, 4, 3, 1, std::vector<uint8_t>(5)).ok());
  writer->reset();
  std::vector<tensorboard::Event> events = ReadEvents(&env, path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step(), 7);
  const tensorboard::Summary::Value& v = events[1].summary().value(0);
  EXPECT_EQ(v.tag(), "input_images/image/0");
  ASSERT_TRUE(v.has_image());
  EXPECT_EQ(v.image().height(), 4);
  EXPECT_EQ(v.image().width(), 3);
  EXPECT_EQ(v.image().colorspace(), 1);
  absl::StatusOr<PngImage> png = DecodePng(v.image().encoded_image_string());
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(png->pixels, std::string(pixels.begin(), pixels.end()));
}

TEST(EventWriterTest, HParamsAsTensorBoardsPluginWritesThem) {
  MemEnv env;
  auto writer = EventWriter::Create(&env, "/job", absl::ZeroDuration());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  google::protobuf::Map<std::string, google::protobuf::Value> hparams;
  hparams["learning_rate"].set_number_value(0.1);
  hparams["optimizer"].set_string_value("momentum");
  hparams["nesterov"].set_bool_value(true);
  ASSERT_TRUE(
      (*writer)->WriteSessionStart(hparams, "/job", absl::FromUnixSeconds(1700000000)).ok());
  ASSERT_TRUE((*writer)
                  ->WriteSessionEnd(tensorboard::STATUS_SUCCESS, absl::FromUnixSeconds(1700000100))
                  .ok());
  writer->reset();
  std::vector<tensorboard::Event> events = ReadEvents(&env, path);
  ASSERT_EQ(events.size(), 3u);
  const tensorboard::Summary::Value& start = events[1].summary().value(0);
  EXPECT_EQ(events[1].step(), 0);
  EXPECT_EQ(start.tag(), "_hparams_/session_start_info");
  EXPECT_EQ(start.metadata().plugin_data().plugin_name(), "hparams");
  // The value is the plugin's NULL_TENSOR, an empty float vector: field 8,
  // 6 bytes: dtype DT_FLOAT, shape [0].
  const std::string bytes = start.SerializeAsString();
  EXPECT_NE(bytes.find(std::string("\x42\x06\x08\x01\x12\x02\x12\x00", 8)), std::string::npos);
  tensorboard::HParamsPluginData data;
  ASSERT_TRUE(data.ParseFromString(start.metadata().plugin_data().content()));
  EXPECT_EQ(data.version(), 0);
  ASSERT_TRUE(data.has_session_start_info());
  EXPECT_EQ(data.session_start_info().model_uri(), "/job");
  EXPECT_EQ(data.session_start_info().start_time_secs(), 1700000000);
  EXPECT_EQ(data.session_start_info().hparams().at("learning_rate").number_value(), 0.1);
  EXPECT_EQ(data.session_start_info().hparams().at("optimizer").string_value(), "momentum");
  EXPECT_TRUE(data.session_start_info().hparams().at("nesterov").bool_value());
  // The content's first bytes: version 0 is not written; field 3
  // (session_start_info), length-delimited.
  EXPECT_EQ(start.metadata().plugin_data().content()[0], '\x1a');

  const tensorboard::Summary::Value& end = events[2].summary().value(0);
  EXPECT_EQ(end.tag(), "_hparams_/session_end_info");
  ASSERT_TRUE(data.ParseFromString(end.metadata().plugin_data().content()));
  ASSERT_TRUE(data.has_session_end_info());
  EXPECT_EQ(data.session_end_info().status(), tensorboard::STATUS_SUCCESS);
  EXPECT_EQ(data.session_end_info().end_time_secs(), 1700000100);

  absl::StatusOr<std::string> report = InspectEventDir(&env, "/job");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->find("learning_rate=0.1 nesterov=true optimizer=momentum"), std::string::npos)
      << *report;
  EXPECT_NE(report->find("STATUS_SUCCESS"), std::string::npos) << *report;
}

// TensorBoard's PR CURVES tab reads a float32 [6, n] tensor whose metadata
// names the pr_curves plugin with its version 0 data.
TEST(EventWriterTest, PrCurvesAreTheirPluginsTensor) {
  MemEnv env;
  auto writer = EventWriter::Create(&env, "/job/eval", absl::Seconds(10));
  ASSERT_TRUE(writer.ok());
  std::vector<float> curve(6 * 3);
  for (size_t i = 0; i < curve.size(); ++i) curve[i] = 0.5f * i;
  ASSERT_TRUE((*writer)->WritePrCurve("pr_curve", 40, curve, 3).ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*writer)->WritePrCurve("pr_curve", 40, curve, 4)));
  ASSERT_TRUE((*writer)->Flush().ok());
  const std::vector<tensorboard::Event> events = ReadEvents(&env, (*writer)->path());
  ASSERT_EQ(events.size(), 2u);
  const tensorboard::Summary::Value& v = events[1].summary().value(0);
  EXPECT_EQ(events[1].step(), 40);
  EXPECT_EQ(v.tag(), "pr_curve");
  EXPECT_EQ(v.metadata().plugin_data().plugin_name(), "pr_curves");
  tensorboard::PrCurvePluginData data;
  ASSERT_TRUE(data.ParseFromString(v.metadata().plugin_data().content()));
  EXPECT_EQ(data.version(), 0);
  EXPECT_EQ(data.num_thresholds(), 3u);
  // The content's bytes: version 0 is not written; field 2 (num_thresholds), varint 3.
  EXPECT_EQ(v.metadata().plugin_data().content(), std::string("\x10\x03", 2));
  EXPECT_EQ(v.tensor().dtype(), 1);
  ASSERT_EQ(v.tensor().tensor_shape().dim_size(), 2);
  EXPECT_EQ(v.tensor().tensor_shape().dim(0).size(), 6);
  EXPECT_EQ(v.tensor().tensor_shape().dim(1).size(), 3);
  EXPECT_EQ(std::vector<float>(v.tensor().float_val().begin(), v.tensor().float_val().end()),
            curve);
  absl::StatusOr<std::string> report = InspectEventDir(&env, "/job");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(std::regex_search(*report, std::regex(R"(pr_curve +pr_curve +1 points)"))) << *report;
}

TEST(EventWriterTest, TwoWritersInOneDirGetTwoFiles) {
  MemEnv env;
  auto a = EventWriter::Create(&env, "/job", absl::Seconds(10));
  auto b = EventWriter::Create(&env, "/job", absl::Seconds(10));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

TEST(MakeHistogramTest, EqualValuesMakeOneBucket) {
  tensorboard::HistogramProto h = MakeHistogram(std::vector<float>{2, 2, 2});
  ASSERT_EQ(h.bucket_size(), 1);
  EXPECT_EQ(h.bucket(0), 3);
  EXPECT_EQ(h.bucket_limit(0), 2);
  EXPECT_EQ(MakeHistogram({}).num(), 0);
}

// A job dir's two runs, written and closed: "." with loss at steps 10, 20
// and 30 and a histogram at 20, "eval" with accuracy 0.75 at 30. Returns the
// first run's file ("" after a failure, which is the test's).
std::string WriteTrainAndEvalRuns(MemEnv* env) {
  auto train = EventWriter::Create(env, "/job", absl::Seconds(10));
  auto eval = EventWriter::Create(env, "/job/eval", absl::Seconds(10));
  EXPECT_TRUE(train.ok() && eval.ok());
  if (!train.ok() || !eval.ok()) return "";
  for (int step = 10; step <= 30; step += 10) {
    EXPECT_TRUE((*train)->WriteScalar("loss", step, 1.0f / step).ok());
  }
  EXPECT_TRUE((*train)->WriteHistogram("dense/kernel", 20, std::vector<float>{1, 2}).ok());
  EXPECT_TRUE((*eval)->WriteScalar("accuracy", 30, 0.75f).ok());
  return (*train)->path();
}

TEST(InspectEventDirTest, ListsRunsAndTagsAndFindsDamage) {
  MemEnv env;
  const std::string train_path = WriteTrainAndEvalRuns(&env);
  ASSERT_FALSE(train_path.empty());
  absl::StatusOr<std::string> report = InspectEventDir(&env, "/job");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->find("run .: 1 file(s), 5 records, checksums OK"), std::string::npos)
      << *report;
  EXPECT_NE(report->find("run eval: 1 file(s), 2 records"), std::string::npos) << *report;
  EXPECT_TRUE(std::regex_search(
      *report, std::regex(R"(loss +scalar +3 points, steps 10\.\.30, last 0\.0333)")))
      << *report;
  EXPECT_TRUE(std::regex_search(*report, std::regex(R"(dense/kernel +histogram +1 points)")))
      << *report;
  EXPECT_TRUE(std::regex_search(
      *report, std::regex(R"(accuracy +scalar +1 points, steps 30\.\.30, last 0\.75)")))
      << *report;

  // A record cut short at the end (a writer killed mid-append) is reported
  // with its offset; everything before it is listed.
  const std::string whole = *env.ReadFile(train_path);
  ASSERT_TRUE(env.WriteFileAtomic(train_path, whole.substr(0, whole.size() - 5)).ok());
  report = InspectEventDir(&env, "/job");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(std::regex_search(*report, std::regex(R"(note: .*record at offset \d+ .*cut short)")))
      << *report;
  EXPECT_TRUE(std::regex_search(*report, std::regex(R"(loss +scalar +3 points)"))) << *report;
  ASSERT_TRUE(env.WriteFileAtomic(train_path, whole).ok());

  // A flipped bit anywhere is found, naming the file and an offset.
  std::string bytes = *env.ReadFile(train_path);
  bytes[bytes.size() - 10] ^= 0x01;
  ASSERT_TRUE(env.WriteFileAtomic(train_path, bytes).ok());
  report = InspectEventDir(&env, "/job");
  EXPECT_TRUE(absl::IsDataLoss(report.status())) << report.status();
  EXPECT_NE(report.status().message().find(train_path), std::string::npos) << report.status();
  EXPECT_NE(report.status().message().find("offset"), std::string::npos) << report.status();
  EXPECT_TRUE(absl::IsNotFound(InspectEventDir(&env, "/nothing").status()));
}

TEST(ReadEventScalarsTest, EveryScalarByRunAndTag) {
  MemEnv env;
  const std::string train_path = WriteTrainAndEvalRuns(&env);
  ASSERT_FALSE(train_path.empty());
  absl::StatusOr<std::map<std::string, std::vector<ScalarPoint>>> scalars =
      ReadEventScalars(&env, "/job");
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  ASSERT_EQ(scalars->size(), 2u);  // no histogram
  const std::vector<ScalarPoint>& loss = scalars->at("loss");
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_EQ(loss[0].step, 10);
  EXPECT_FLOAT_EQ(loss[2].value, 1.0f / 30);
  EXPECT_GT(loss[0].wall_time, 1.5e9);
  ASSERT_EQ(scalars->at("eval/accuracy").size(), 1u);
  EXPECT_FLOAT_EQ(scalars->at("eval/accuracy")[0].value, 0.75f);
  // A cut last record ends the file's points; a flipped byte is DataLoss.
  const std::string whole = *env.ReadFile(train_path);
  ASSERT_TRUE(env.WriteFileAtomic(train_path, whole.substr(0, whole.size() - 5)).ok());
  scalars = ReadEventScalars(&env, "/job");
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  EXPECT_EQ(scalars->at("loss").size(), 3u);
  std::string bytes = whole;
  bytes[bytes.size() - 10] ^= 0x01;
  ASSERT_TRUE(env.WriteFileAtomic(train_path, bytes).ok());
  EXPECT_TRUE(absl::IsDataLoss(ReadEventScalars(&env, "/job").status()));
  EXPECT_TRUE(absl::IsNotFound(ReadEventScalars(&env, "/nothing").status()));
}

}  // namespace
}  // namespace pstrain
