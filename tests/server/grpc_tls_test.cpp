// Tests of GrpcServer's transport set-up: TLS, mutual TLS, and the start errors (unreadable
// certificate, address in use). The certificates are test fixtures made with openssl by
// scripts/fixtures/make_tls_fixtures.sh. grpc.health.v1 answers without a model, so a Check that
// returns OK proves the handshake.
#include "server/grpc_server.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "grpc/health/v1/health.grpc.pb.h"

namespace tandem::server {
namespace {

const std::string kTls = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tls/";

std::string read(const std::string& name) {
  std::ifstream in(kTls + name);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

config::ServerConfig tls_config(bool mutual) {
  config::ServerConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.tls_cert_file = kTls + "server.pem";
  c.tls_key_file = kTls + "server.key";
  if (mutual) c.tls_client_ca_file = kTls + "ca.pem";
  return c;
}

// The health Check's status over a channel with `creds` (the server name is checked as
// "localhost", which the server certificate names).
grpc::Status check(int port, const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), creds, args);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckResponse response;
  return stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &response);
}

std::shared_ptr<grpc::ChannelCredentials> tls_client(const std::string& cert = "",
                                                     const std::string& key = "") {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = read("ca.pem");
  if (!cert.empty()) {
    options.pem_cert_chain = read(cert);
    options.pem_private_key = read(key);
  }
  return grpc::SslCredentials(options);
}

TEST_CASE("TLS: a client trusting the CA connects, a plaintext client does not", "[server][grpc]") {
  Result<std::unique_ptr<GrpcServer>> server = GrpcServer::start(tls_config(false), {});
  REQUIRE(server.ok());
  CHECK((*server)->tls());
  CHECK(check((*server)->port(), tls_client()).ok());
  CHECK_FALSE(check((*server)->port(), grpc::InsecureChannelCredentials()).ok());
}

TEST_CASE("mutual TLS: only clients with a certificate from the configured CA", "[server][grpc]") {
  Result<std::unique_ptr<GrpcServer>> server = GrpcServer::start(tls_config(true), {});
  REQUIRE(server.ok());
  const int port = (*server)->port();
  CHECK(check(port, tls_client("client.pem", "client.key")).ok());
  CHECK_FALSE(check(port, tls_client()).ok());                                // no certificate
  CHECK_FALSE(check(port, tls_client("stranger.pem", "stranger.key")).ok());  // untrusted CA
  CHECK_FALSE(check(port, grpc::InsecureChannelCredentials()).ok());
}

TEST_CASE("start errors name the key or the address at fault", "[server][grpc]") {
  config::ServerConfig c = tls_config(false);
  c.tls_key_file = kTls + "missing.key";
  Result<std::unique_ptr<GrpcServer>> bad = GrpcServer::start(c, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("server.tls_key_file"));
  CHECK_THAT(bad.status().message(), Catch::Contains("missing.key"));

  config::ServerConfig plain;
  plain.host = "127.0.0.1";
  plain.port = 0;
  Result<std::unique_ptr<GrpcServer>> first = GrpcServer::start(plain, {});
  REQUIRE(first.ok());
  plain.port = (*first)->port();
  Result<std::unique_ptr<GrpcServer>> second = GrpcServer::start(plain, {});
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(second.status().message(), Catch::Contains("127.0.0.1:" + std::to_string(plain.port)));
}

}  // namespace
}  // namespace tandem::server
