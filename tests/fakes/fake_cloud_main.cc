// pstrain-fake-cloud: a Cloud Storage server and/or a metadata server of our
// own, as a process, for tests whose tasks run in other processes or network
// namespaces ("simulated hosts").
//   pstrain-fake-cloud --host=10.77.0.1 --gcs_port=4443 --buckets=job-bucket
//   pstrain-fake-cloud --host=10.77.0.12 --metadata_port=8080 --metadata_file=vm.txt
// --metadata_file holds "path=value" lines ("instance/attributes/pstrain-role=ps");
// it is read again whenever it changes, so a test can edit an instance's metadata.
// Runs until SIGTERM or SIGINT.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_split.h"
#include "common/env.h"
#include "gflags/gflags.h"
#include "tests/fakes/fake_gcs.h"

DEFINE_string(host, "127.0.0.1", "Address to listen on.");
DEFINE_int32(gcs_port, -1, "Cloud Storage port (0: any free port; -1: none).");
DEFINE_string(buckets, "", "Comma-separated buckets that exist.");
DEFINE_string(token, "", "Bearer token the storage server requires (empty: none).");
DEFINE_int32(metadata_port, -1, "Metadata server port (0: any free port; -1: none).");
DEFINE_string(metadata_file, "", "\"path=value\" lines served by the metadata server.");
DEFINE_string(port_file, "", "Writes \"gcs <port>\" and \"metadata <port>\" lines here.");

namespace {

volatile sig_atomic_t stop = 0;
void OnSignal(int) { stop = 1; }

// Loads "path=value" lines; a value may hold '=' but not a newline, except
// that "\n" in it stands for one.
void LoadMetadata(const std::string& file, pstrain::testing_util::FakeMetadata* metadata) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos || line.empty() || line[0] == '#') continue;
    // Built char by char: std::string::replace here trips GCC 12's
    // -Wrestrict false positive.
    std::string value;
    for (size_t i = eq + 1; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
        value.push_back('\n');
        ++i;
      } else {
        value.push_back(line[i]);
      }
    }
    metadata->Set(line.substr(0, eq), value);
  }
}

int64_t ModifiedNanos(const std::string& file) {
  struct stat st;
  if (stat(file.c_str(), &st) != 0) return -1;
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  pstrain::testing_util::FakeGcs gcs;
  pstrain::testing_util::FakeMetadata metadata;
  std::ostringstream ports;
  if (FLAGS_gcs_port >= 0) {
    const int port = gcs.Start(FLAGS_host, FLAGS_gcs_port);
    if (port < 0) {
      std::fprintf(stderr, "cannot listen on %s:%d\n", FLAGS_host.c_str(), FLAGS_gcs_port);
      return 1;
    }
    for (absl::string_view b : absl::StrSplit(FLAGS_buckets, ',', absl::SkipEmpty())) {
      gcs.CreateBucket(std::string(b));
    }
    gcs.RequireToken(FLAGS_token);
    ports << "gcs " << port << "\n";
  }
  int64_t loaded = -2;
  if (FLAGS_metadata_port >= 0) {
    const int port = metadata.Start(FLAGS_host, FLAGS_metadata_port);
    if (port < 0) {
      std::fprintf(stderr, "cannot listen on %s:%d\n", FLAGS_host.c_str(), FLAGS_metadata_port);
      return 1;
    }
    ports << "metadata " << port << "\n";
  }
  // Written whole or not at all: a test polls for it.
  if (!FLAGS_port_file.empty()) {
    if (absl::Status s = pstrain::Env::Default()->WriteFileAtomic(FLAGS_port_file, ports.str());
        !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  while (!stop) {
    if (FLAGS_metadata_port >= 0 && !FLAGS_metadata_file.empty()) {
      const int64_t modified = ModifiedNanos(FLAGS_metadata_file);
      if (modified != loaded) {
        LoadMetadata(FLAGS_metadata_file, &metadata);
        loaded = modified;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}
