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

std::vector<std::string> GceLocalCredentialFiles(const GcePlan& plan) {
  std::vector<std::string> files = {"ca.crt", "ca.key", "job.token"};
  for (const std::string& name : CredentialNames(plan.job.cluster)) {
    files.push_back(name + ".crt");
    files.push_back(name + ".key");
  }
  return files;
}

absl::StatusOr<bool> EnsureGceCredentials(const GcePlan& plan, const std::string& dir) {
  const std::vector<std::string> names = CredentialNames(plan.job.cluster);
  Env* local = Env::Default();
  std::vector<std::string> present, missing;
  for (const std::string& f : GceLocalCredentialFiles(plan)) {
    (local->FileExists(JoinPath(dir, f)) ? present : missing).push_back(f);
  }
  if (present.empty()) {
    // A directory of its own: `down` deletes it, so it must hold nothing else.
    std::error_code error;
    const std::filesystem::path path(dir);
    if (std::filesystem::exists(path, error) && !std::filesystem::is_empty(path, error)) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, " is not empty and holds none of job ", plan.spec.job,
          "'s credentials: give --credentials_dir a new or empty directory of the job's own "
          "(pstrain-gce down deletes it)"));
    }
    std::filesystem::create_directories(path.parent_path(), error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot make ", dir, "'s parent: ", error.message(), "; give --credentials_dir=DIR"));
    }
    PSTRAIN_RETURN_IF_ERROR(MakeJobCredentials(dir, names));
    // MakeJobCredentials makes a missing directory 0700; an empty one that
    // was there already is made so too.
    std::filesystem::permissions(path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make ", dir, " private (0700): ", error.message()));
    }
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
                       "/ca.crt: the directory mixes credentials of two jobs; ", what_to_do));
    }
  }
  return false;
}

absl::Status UploadGceCredentials(Env* local, Env* gcs, const GcePlan& plan,
                                  const std::string& dir) {
  if (plan.spec.credentials.empty()) {
    return absl::FailedPreconditionError("this job hands out no credentials (spec.credentials)");
  }
  // The job's VMs already hold the certificates of the CA in the bucket, if
  // there is one: another CA's would lock every recreated VM out of the job.
  const std::string bucket_ca = absl::StrCat(plan.spec.credentials, "/ca.crt");
  absl::StatusOr<std::string> theirs = gcs->ReadFile(bucket_ca);
  if (theirs.ok()) {
    PSTRAIN_ASSIGN_OR_RETURN(const std::string ours, local->ReadFile(JoinPath(dir, "ca.crt")));
    if (*theirs != ours) {
      return absl::FailedPreconditionError(absl::StrCat(
          bucket_ca, " is another CA than ", dir, "/ca.crt: job ", plan.spec.job,
          " was started from another machine or directory, and "
          "its VMs trust that CA. Run pstrain-gce with that --credentials_dir, or stop the job "
          "with pstrain-gce down first"));
    }
  } else if (!absl::IsNotFound(theirs.status())) {
    return absl::Status(theirs.status().code(),
                        absl::StrCat("cannot read ", bucket_ca, ": ", theirs.status().message()));
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

absl::Status RemoveLocalGceCredentials(const GcePlan& plan, const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::exists(dir, error)) return absl::OkStatus();
  for (const std::string& f : GceLocalCredentialFiles(plan)) {
    std::filesystem::remove(JoinPath(dir, f), error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot delete ", JoinPath(dir, f), ": ", error.message()));
    }
  }
  if (!std::filesystem::remove(dir, error) || error) {
    return absl::FailedPreconditionError(absl::StrCat(
        "deleted the job's credentials in ", dir, " but not the directory, which holds other files",
        error ? absl::StrCat(" (", error.message(), ")") : std::string()));
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
