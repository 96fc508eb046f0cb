// GrpcServer: tandemd's gRPC listener — address, TLS / mutual TLS, the server options the SMG
// gateway needs, the registered services, grpc.health.v1 and server reflection.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/server.h>

#include "base/result.h"
#include "config/config.h"

namespace tandem::server {

// Largest message tandemd accepts (a prompt of a few hundred thousand token ids fits) and sends.
// Sent messages stay below the 4 MiB that the gateway's client decodes by default.
inline constexpr int kMaxReceiveMessageBytes = 16 << 20;
inline constexpr int kMaxSendMessageBytes = 4 << 20;

// Owned by main. Services must outlive it.
class GrpcServer {
 public:
  // Listens on config.host:config.port (port 0: a free port, see port()), with TLS when
  // tls_cert_file/tls_key_file are set and client certificates required when tls_client_ca_file
  // is set. Registers `services`, grpc.health.v1 (NOT_SERVING until set_serving(true)) and
  // reflection. Keepalive pings without calls are allowed every 10 s (the gateway pings every
  // 30 s even when idle). Errors: INVALID_ARGUMENT naming an unreadable certificate/key file;
  // UNAVAILABLE naming the address when it cannot listen (port in use, bad host).
  static Result<std::unique_ptr<GrpcServer>> start(const config::ServerConfig& config,
                                                   const std::vector<grpc::Service*>& services);
  ~GrpcServer();

  int port() const { return port_; }
  bool tls() const { return tls_; }
  // grpc.health.v1: the overall status ("") and each registered service's. Any thread.
  void set_serving(bool serving);
  // Stops accepting calls; calls still running after `grace` are cancelled. Then waits for the
  // server's threads. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

 private:
  GrpcServer() = default;

  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> service_names_;
  int port_ = 0;
  bool tls_ = false;
  bool shut_down_ = false;
};

}  // namespace tandem::server
