// GrpcServer: ServerBuilder set-up (credentials, options, services, health, reflection).
#include "server/grpc_server.h"

#include <fstream>
#include <sstream>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "base/status.h"

namespace tandem::server {
namespace {

Result<std::string> read_pem(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument_error(key + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return invalid_argument_error(key + ": '" + path + "' is empty");
  return text.str();
}

Result<std::shared_ptr<grpc::ServerCredentials>> credentials(const config::ServerConfig& c) {
  if (c.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  TANDEM_ASSIGN_OR_RETURN(pair.private_key, read_pem("server.tls_key_file", c.tls_key_file));
  TANDEM_ASSIGN_OR_RETURN(pair.cert_chain, read_pem("server.tls_cert_file", c.tls_cert_file));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!c.tls_client_ca_file.empty()) {
    TANDEM_ASSIGN_OR_RETURN(options.pem_root_certs,
                            read_pem("server.tls_client_ca_file", c.tls_client_ca_file));
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

std::string listen_address(const config::ServerConfig& c) {
  // IPv6 literals need brackets in a gRPC address.
  const bool ipv6 = c.host.find(':') != std::string::npos && c.host.front() != '[';
  return (ipv6 ? "[" + c.host + "]" : c.host) + ":" + std::to_string(c.port);
}

}  // namespace

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(const config::ServerConfig& config,
                                                      const std::vector<grpc::Service*>& services) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds, credentials(config));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->tls_ = !config.tls_cert_file.empty();
  grpc::ServerBuilder builder;
  const std::string address = listen_address(config);
  builder.AddListeningPort(address, creds, &server->port_);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  builder.SetMaxSendMessageSize(kMaxSendMessageBytes);
  // The gateway's channel pings every 30 s even without calls; without these two the server
  // answers with GOAWAY too_many_pings and the gateway reconnects.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  // gRPC binds with SO_REUSEPORT by default, so a second tandemd on the same port would start
  // and silently share the traffic: refuse instead (hardening row C14, "port in use").
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* service : services) builder.RegisterService(service);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return unavailable_error("cannot listen on " + address +
                             " (port in use, or an address this host does not have); set "
                             "server.host / server.port");
  }
  server->service_names_ = {"vllm.grpc.engine.VllmEngine", "tandem.v1.Tandem"};
  server->set_serving(false);
  return server;
}

GrpcServer::~GrpcServer() {
  shutdown(std::chrono::milliseconds(0));
}

void GrpcServer::set_serving(bool serving) {
  if (server_ == nullptr || shut_down_) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);  // the overall status and every name set so far
  for (const std::string& name : service_names_) health->SetServingStatus(name, serving);
}

void GrpcServer::shutdown(std::chrono::milliseconds grace) {
  if (server_ == nullptr || shut_down_) return;
  shut_down_ = true;
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->Shutdown();  // Watch streams end; later checks say NOT_SERVING
  }
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
}

}  // namespace tandem::server
