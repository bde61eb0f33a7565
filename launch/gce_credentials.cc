#include "launch/gce_credentials.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "security/job_credentials.h"

namespace pstrain {
namespace {

// The job's task names (chief-0, worker-0, ..., ps-0, ...), without the
// "client" pair CredentialNames adds for tools.
std::vector<std::string> TaskNames(const GcePlan& plan) {
  std::vector<std::string> names;
  for (const std::string& name : CredentialNames(plan.job.cluster)) {
    if (name != "client") names.push_back(name);
  }
  return names;
}

}  // namespace

absl::StatusOr<std::string> DefaultGceCredentialsDir(const GceSpec& spec,
                                                     const char* xdg_config_home,
                                                     const char* home) {
  std::string base;
  if (xdg_config_home != nullptr && xdg_config_home[0] != '\0') {
    base = xdg_config_home;
  } else if (home != nullptr && home[0] != '\0') {
    base = JoinPath(home, ".config");
  } else {
    return absl::InvalidArgumentError(
        "neither XDG_CONFIG_HOME nor HOME is set, so there is no default place for the job's "
        "certificates on this machine: give --credentials_dir=DIR");
  }
  return JoinPath(base, absl::StrCat("pstrain/gce/", spec.project, "/", spec.job));
}

std::vector<std::string> GceUploadedCredentialFiles(const GcePlan& plan) {
  std::vector<std::string> files = {"ca.crt", "job.token"};
  for (const std::string& name : TaskNames(plan)) {
    files.push_back(name + ".crt");
    files.push_back(name + ".key");
  }
  return files;
}

absl::StatusOr<bool> EnsureGceCredentials(const GcePlan& plan, const std::string& dir) {
  const std::vector<std::string> names = CredentialNames(plan.job.cluster);
  std::vector<std::string> files = {"ca.crt", "ca.key", "job.token"};
  for (const std::string& name : names) {
    files.push_back(name + ".crt");
    files.push_back(name + ".key");
  }
  Env* local = Env::Default();
  std::vector<std::string> present, missing;
  for (const std::string& f : files) {
    (local->FileExists(JoinPath(dir, f)) ? present : missing).push_back(f);
  }
  if (present.empty()) {
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot make ", dir, "'s parent: ", error.message(), "; give --credentials_dir=DIR"));
    }
    PSTRAIN_RETURN_IF_ERROR(MakeJobCredentials(dir, names));
    return true;
  }
  const std::string what_to_do = absl::StrCat(
      "remove it (pstrain-gce down --config ... does, with the job's other resources) or give "
      "another --credentials_dir");
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " holds some of job ", plan.spec.job, "'s credentials but not ",
                     missing.front(), " (", missing.size(), " files missing): ", what_to_do));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string ca, local->ReadFile(JoinPath(dir, "ca.crt")));
  for (const std::string& name : names) {
    const std::string path = JoinPath(dir, name + ".crt");
    PSTRAIN_ASSIGN_OR_RETURN(const std::string cert, local->ReadFile(path));
    absl::StatusOr<CertificateInfo> info = InspectCertificate(cert, ca);
    if (!info.ok() || !info->signed_by_ca) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " was not signed by the CA in ", dir,
                       "/ca.crt: the directory mixes credentials of ", "two jobs; ", what_to_do));
    }
  }
  return false;
}

absl::Status UploadGceCredentials(Env* local, Env* gcs, const GcePlan& plan,
                                  const std::string& dir) {
  if (plan.spec.credentials.empty()) {
    return absl::FailedPreconditionError("this job hands out no credentials (spec.credentials)");
  }
  for (const std::string& f : GceUploadedCredentialFiles(plan)) {
    const std::string from = JoinPath(dir, f);
    const std::string to = absl::StrCat(plan.spec.credentials, "/", f);
    absl::StatusOr<std::string> contents = local->ReadFile(from);
    if (!contents.ok()) {
      return absl::Status(contents.status().code(),
                          absl::StrCat("cannot read ", from, ": ", contents.status().message()));
    }
    if (absl::Status s = gcs->WriteFileAtomic(to, *contents); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("cannot upload ", from, " to ", to, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> DeleteGceCredentials(Env* gcs, const GceSpec& spec) {
  if (spec.credentials.empty()) return 0;
  absl::StatusOr<std::vector<std::string>> objects = gcs->ListDir(spec.credentials);
  if (absl::IsNotFound(objects.status())) return 0;
  if (!objects.ok()) return objects.status();
  for (const std::string& name : *objects) {
    const std::string path = absl::StrCat(spec.credentials, "/", name);
    if (absl::Status s = gcs->DeleteFile(path); !s.ok() && !absl::IsNotFound(s)) {
      return absl::Status(s.code(), absl::StrCat("cannot delete ", path, ": ", s.message()));
    }
  }
  return static_cast<int>(objects->size());
}

}  // namespace pstrain
