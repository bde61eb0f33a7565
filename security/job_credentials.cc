#include "security/job_credentials.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

// The last OpenSSL error, for a message.
std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

absl::Status Failed(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", OpenSslError()));
}

absl::StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (key == nullptr) return Failed("cannot make an ECDSA P-256 key");
  return key;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (ext == nullptr || X509_add_ext(cert, ext.get(), -1) != 1) {
    return Failed(absl::StrCat("cannot add the certificate extension ", value));
  }
  return absl::OkStatus();
}

// A certificate for `name` with `key`, signed by `issuer_key` (and issued by
// `issuer`, or self-signed when it is null).
absl::StatusOr<Cert> NewCertificate(const std::string& name, EVP_PKEY* key, X509* issuer,
                                    EVP_PKEY* issuer_key, int days) {
  Cert cert(X509_new());
  if (cert == nullptr) return Failed("cannot make a certificate");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return Failed("no random bytes");
  serial[0] &= 0x7f;  // a positive serial number
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  const bool serial_ok = bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (!serial_ok || X509_set_version(cert.get(), 2) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days) == nullptr ||
      X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("pstrain job"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : subject) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Failed(absl::StrCat("cannot fill the certificate of ", name));
  }
  X509* signer = issuer ? issuer : cert.get();
  if (issuer == nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    PSTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
  } else {
    PSTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    PSTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature"));
    PSTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
    PSTRAIN_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_subject_alt_name, absl::StrCat("DNS:", name).c_str()));
  }
  PSTRAIN_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return Failed(absl::StrCat("cannot sign the certificate of ", name));
  }
  return cert;
}

absl::StatusOr<std::string> BioContents(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  if (n <= 0 || data == nullptr) return Failed("cannot write PEM");
  return std::string(data, n);
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), cert) != 1) return Failed("cannot write PEM");
  return BioContents(bio.get());
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Failed("cannot write PEM");
  }
  return BioContents(bio.get());
}

}  // namespace

absl::Status WriteNewFile(const std::string& path, const std::string& contents, int mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(path,
                       " exists: the credentials of a job are not replaced; use a new "
                       "directory, or delete the old one first"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::vector<std::string> CredentialNames(const ClusterSpec& cluster) {
  std::vector<std::string> names;
  for (size_t i = 0; i < cluster.chief.size(); ++i) names.push_back(TaskCredentialName("chief", i));
  for (size_t i = 0; i < cluster.worker.size(); ++i)
    names.push_back(TaskCredentialName("worker", i));
  for (size_t i = 0; i < cluster.ps.size(); ++i) names.push_back(TaskCredentialName("ps", i));
  names.push_back("client");
  return names;
}

absl::Status MakeJobCredentials(const std::string& dir, const std::vector<std::string>& names,
                                int days) {
  for (const std::string& name : names) {
    if (name.empty() || name == "ca" || name == "job" ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", name, "\" is not a credential name: lowercase letters, digits and '-' (not ca)"));
    }
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot make ", dir, ": ", std::strerror(errno)));
  }
  PSTRAIN_ASSIGN_OR_RETURN(Key ca_key, NewKey());
  PSTRAIN_ASSIGN_OR_RETURN(
      Cert ca, NewCertificate("pstrain job CA", ca_key.get(), nullptr, ca_key.get(), days));
  PSTRAIN_ASSIGN_OR_RETURN(std::string ca_pem, CertPem(ca.get()));
  PSTRAIN_ASSIGN_OR_RETURN(std::string ca_key_pem, KeyPem(ca_key.get()));
  PSTRAIN_RETURN_IF_ERROR(WriteNewFile(JoinPath(dir, "ca.key"), ca_key_pem, 0600));
  PSTRAIN_RETURN_IF_ERROR(WriteNewFile(JoinPath(dir, "ca.crt"), ca_pem, 0644));
  for (const std::string& name : names) {
    PSTRAIN_ASSIGN_OR_RETURN(Key key, NewKey());
    PSTRAIN_ASSIGN_OR_RETURN(Cert cert,
                             NewCertificate(name, key.get(), ca.get(), ca_key.get(), days));
    PSTRAIN_ASSIGN_OR_RETURN(std::string key_pem, KeyPem(key.get()));
    PSTRAIN_ASSIGN_OR_RETURN(std::string cert_pem, CertPem(cert.get()));
    PSTRAIN_RETURN_IF_ERROR(WriteNewFile(JoinPath(dir, name + ".key"), key_pem, 0600));
    PSTRAIN_RETURN_IF_ERROR(WriteNewFile(JoinPath(dir, name + ".crt"), cert_pem, 0644));
  }
  unsigned char token[32];
  if (RAND_bytes(token, sizeof(token)) != 1) return Failed("no random bytes for the job token");
  const std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(token), sizeof(token)));
  return WriteNewFile(JoinPath(dir, "job.token"), hex + "\n", 0600);
}

absl::StatusOr<CertificateInfo> InspectCertificate(const std::string& cert_pem,
                                                   const std::string& ca_pem) {
  auto read = [](const std::string& pem) {
    Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  };
  Cert cert = read(cert_pem), ca = read(ca_pem);
  if (cert == nullptr) return absl::InvalidArgumentError("not a PEM certificate");
  if (ca == nullptr) return absl::InvalidArgumentError("the CA is not a PEM certificate");
  CertificateInfo info;
  std::unique_ptr<GENERAL_NAMES, Free> names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type != GEN_DNS) continue;
    const ASN1_STRING* s = n->d.dNSName;
    info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                ASN1_STRING_length(s));
  }
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  info.signed_by_ca = ca_key != nullptr && X509_verify(cert.get(), ca_key) == 1;
  ERR_clear_error();
  return info;
}

}  // namespace pstrain
