#ifndef PSTRAIN_LAUNCH_GCE_CREDENTIALS_H_
#define PSTRAIN_LAUNCH_GCE_CREDENTIALS_H_

// A Compute Engine job's mutual TLS credentials (pstrain-gce up/down).
//
// `up` makes the job's CA, a certificate and key per task and the job token
// on the user's machine (a 0700 directory, by default
// ~/.config/pstrain/gce/<project>/<job>), then uploads what the tasks read to
// spec.credentials (<job_dir>/credentials/): ca.crt, job.token and each
// task's <name>.crt and <name>.key. Never ca.key, which stays on the user's
// machine, and never the "client" pair, which is for the user's own tools.
// Each VM's startup script fetches ca.crt, job.token and its own task's pair,
// and nothing else. `down` deletes the uploaded objects and the local
// directory.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "launch/gce_plan.h"

namespace pstrain {

// The local directory for the job's credentials when --credentials_dir is
// not given: $XDG_CONFIG_HOME/pstrain/gce/<project>/<job>, else
// $HOME/.config/...; either may be null or empty (InvalidArgument asking for
// --credentials_dir when both are).
absl::StatusOr<std::string> DefaultGceCredentialsDir(const GceSpec& spec,
                                                     const char* xdg_config_home, const char* home);

// The files a VM of the job fetches from spec.credentials, as names in that
// directory: every task's pair, ca.crt and job.token.
std::vector<std::string> GceUploadedCredentialFiles(const GcePlan& plan);

// The files the job's credentials are on the user's machine: ca.crt, ca.key,
// job.token and a pair per CredentialNames (the "client" pair included).
std::vector<std::string> GceLocalCredentialFiles(const GcePlan& plan);

// Makes the job's credentials in the local directory `dir` (parents made as
// needed, `dir` itself 0700; it must be missing or empty, as `down` deletes
// it), or keeps them when `dir` already holds a full set whose certificates
// the CA there signed (an `up` run again after a failure). True if they
// were made now. A partial or foreign set, or a directory of other files, is
// FailedPrecondition naming `dir` and what to do; nothing is replaced.
absl::StatusOr<bool> EnsureGceCredentials(const GcePlan& plan, const std::string& dir);

// Copies GceUploadedCredentialFiles from `dir` on `local` to spec.credentials
// on `gcs`. An error names the file and the object. A ca.crt already in the
// bucket that is not `dir`'s (the job was started with another set, whose
// certificates its VMs hold) is FailedPrecondition, and nothing is uploaded.
absl::Status UploadGceCredentials(Env* local, Env* gcs, const GcePlan& plan,
                                  const std::string& dir);

// Deletes GceLocalCredentialFiles from `dir`, then `dir`, which must then be
// empty (FailedPrecondition otherwise: nothing but the job's files is
// deleted). A missing `dir` is fine.
absl::Status RemoveLocalGceCredentials(const GcePlan& plan, const std::string& dir);

// Deletes every object under spec.credentials on `gcs`; how many there were
// (0 if none: `down` may run twice).
absl::StatusOr<int> DeleteGceCredentials(Env* gcs, const GceSpec& spec);

}  // namespace pstrain

#endif  // PSTRAIN_LAUNCH_GCE_CREDENTIALS_H_
