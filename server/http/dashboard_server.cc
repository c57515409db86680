#include "server/http/dashboard_server.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/http/assets.h"
#include "server/http/connection_gate.h"
#include "server/http/dashboard_auth.h"

namespace smallem {
namespace {

using nlohmann::json;

constexpr char kJson[] = "application/json; charset=utf-8";

// The dashboard's connections (see DashboardServer::Start).
constexpr size_t kDashboardThreads = 256;
constexpr time_t kHeadReadTimeoutSeconds = 5;

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kFailedPrecondition: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

void SendError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatusOf(status);
  res.set_content(json{{"error", std::string(status.message())}}.dump(), kJson);
}

void SendJson(httplib::Response& res, const absl::StatusOr<json>& body) {
  if (!body.ok()) return SendError(res, body.status());
  // Invalid UTF-8 from stored text must not throw: replace it.
  res.set_content(body->dump(-1, ' ', false, json::error_handler_t::replace), kJson);
}

void SendAsset(httplib::Response& res, const std::string& path) {
  const DashboardAsset* asset = FindDashboardAsset(path);
  if (asset == nullptr) {
    return SendError(res, absl::NotFoundError(absl::StrCat("no page at ", path)));
  }
  res.set_content(std::string(asset->body), std::string(asset->content_type));
  res.set_header("Cache-Control", "no-cache");
}

// Loads a PEM certificate chain and key into `ctx` from memory.
bool UsePem(SSL_CTX& ctx, const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> certs(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), &BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  if (!certs || !key) return false;
  X509* leaf = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr);
  if (leaf == nullptr || SSL_CTX_use_certificate(&ctx, leaf) != 1) {
    X509_free(leaf);
    return false;
  }
  X509_free(leaf);
  while (X509* extra = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add_extra_chain_cert(&ctx, extra) != 1) {  // takes ownership on success
      X509_free(extra);
      return false;
    }
  }
  ERR_clear_error();  // the end of the chain reads as an error
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(key.get(), nullptr, nullptr, nullptr);
  const bool ok = pkey != nullptr && SSL_CTX_use_PrivateKey(&ctx, pkey) == 1 &&
                  SSL_CTX_check_private_key(&ctx) == 1;
  EVP_PKEY_free(pkey);
  return ok;
}

// Pages a browser navigates to (redirected to the login form when refused);
// anything else refused gets 401 and a JSON error.
bool IsPage(const std::string& path) { return path == "/" || path == "/index.html"; }

// What anyone may fetch: the login form and the static files (they hold no data).
bool IsPublic(const std::string& path) {
  return path == "/login" || path == "/login.html" || path == "/login.js" ||
         path == "/style.css" || path == "/app.js" || path == "/favicon.svg";
}

}  // namespace

absl::StatusOr<std::unique_ptr<DashboardServer>> DashboardServer::Start(
    const DashboardOptions& options, DashboardApi* api, MetricsFn metrics) {
  const size_t colon = options.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http ", options.listen, ": give HOST:PORT, e.g. 127.0.0.1:8080 (port 0 picks one)"));
  }
  std::string host = options.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const bool tls = !options.tls_cert_pem.empty();
  std::unique_ptr<DashboardServer> s(new DashboardServer());
  if (tls) {
    auto ssl = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
      return UsePem(ctx, options.tls_cert_pem, options.tls_key_pem);
    });
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(
          "the dashboard cannot serve HTTPS: --tls-cert and --tls-key are not a certificate "
          "and its key");
    }
    s->server_ = std::move(ssl);
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  // cpp-httplib serves each connection on one pool thread from its first
  // byte on; the gate below hands it only connections whose head is whole,
  // but a long-poll (/api/changes) still holds its thread up to
  // changes_wait: a pool of 16 was starved by 16 open tabs.
  s->server_->new_task_queue = [] { return new httplib::ThreadPool(kDashboardThreads); };
  // A request body sent slower than a piece per read timeout is dropped.
  s->server_->set_read_timeout(kHeadReadTimeoutSeconds, 0);
  // One request per connection: every head passes the gate.
  s->server_->set_keep_alive_max_count(1);
  s->Route(options, api, std::move(metrics));
  // cpp-httplib listens on a loopback port of its own; the gate, on the
  // dashboard's address, lets a connection through only once its head is
  // whole, and caps connections per peer (connection_gate.h).
  const int backend_port = s->server_->bind_to_any_port("127.0.0.1");
  absl::StatusOr<std::unique_ptr<ConnectionGate>> gate =
      backend_port > 0 ? ConnectionGate::Start(host, port, backend_port,
                                                ConnectionGateOptions{.tls = tls})
                       : absl::UnavailableError("no loopback port for the dashboard");
  if (!gate.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the dashboard cannot listen on ", options.listen,
        " (is something else using the port? pick another with --http HOST:PORT)"));
  }
  s->gate_ = std::move(*gate);
  s->port_ = s->gate_->port();
  const std::string browse_host = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host;
  s->url_ = absl::StrCat(tls ? "https" : "http", "://",
                         browse_host.find(':') != std::string::npos
                             ? absl::StrCat("[", browse_host, "]")
                             : browse_host,
                         ":", s->port_, "/");
  httplib::Server* server = s->server_.get();
  s->thread_ = std::thread([server] { server->listen_after_bind(); });
  return s;
}

DashboardServer::~DashboardServer() { Stop(); }

void DashboardServer::Stop() {
  // The gate first: it closes the connections the server is serving.
  if (gate_ != nullptr) gate_->Stop();
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void DashboardServer::Route(const DashboardOptions& options, DashboardApi* api,
                            MetricsFn metrics) {
  httplib::Server& srv = *server_;
  const std::string token = options.client_token;
  const bool tls = !options.tls_cert_pem.empty();
  const absl::Duration changes_wait = options.changes_wait;

  auto authorized = [token](const httplib::Request& req) {
    return token.empty() || RequestCarriesToken(token, req.get_header_value("Authorization"),
                                                req.get_header_value("Cookie"));
  };
  // Every request passes here first: with a token, only the login form and
  // static files are served to a request without it.
  srv.set_pre_routing_handler([token, authorized](const httplib::Request& req,
                                                  httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("X-Frame-Options", "DENY");
    // Only the coordinator's own scripts run: text from a grid (a variant's
    // name) can never become one.
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                   "frame-ancestors 'none'; form-action 'self'");
    if (token.empty() || IsPublic(req.path) || authorized(req)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (IsPage(req.path)) {
      res.set_redirect("/login", 303);
    } else {
      SendError(res, absl::UnauthenticatedError(
                         "this coordinator has a client token: log in at /login or send "
                         "'Authorization: Bearer <client token>'"));
      res.set_header("WWW-Authenticate", "Bearer");
    }
    return httplib::Server::HandlerResponse::Handled;
  });

  srv.Get("/", [](const httplib::Request&, httplib::Response& res) {
    SendAsset(res, "/index.html");
  });
  srv.Get(R"(/([a-z0-9_-]+\.(html|css|js|svg)))",
          [](const httplib::Request& req, httplib::Response& res) { SendAsset(res, req.path); });
  srv.Get("/login", [](const httplib::Request&, httplib::Response& res) {
    SendAsset(res, "/login.html");
  });
  // Login and logout change the session: only from this dashboard's pages
  // (a form on another site could log a browser in with the attacker's
  // token, or out).
  auto from_this_site = [tls](const httplib::Request& req, httplib::Response& res) {
    if (RequestIsFromThisSite(tls, req.get_header_value("Host"),
                              req.get_header_value("Origin"),
                              req.get_header_value("Sec-Fetch-Site"),
                              req.get_header_value("X-Smallem-Action"))) {
      return true;
    }
    SendError(res, absl::PermissionDeniedError(
                       "log in and out from this dashboard's own page: a request from "
                       "another site (or without an Origin header) needs the header "
                       "X-Smallem-Action: 1"));
    return false;
  };
  srv.Post("/login", [token, tls, from_this_site](const httplib::Request& req,
                                                  httplib::Response& res) {
    if (!from_this_site(req, res)) return;
    const std::string given = req.get_param_value("token");
    if (token.empty()) return res.set_redirect("/", 303);
    if (!RequestCarriesToken(token, absl::StrCat("Bearer ", given), "")) {
      return res.set_redirect("/login?failed=1", 303);
    }
    res.set_header("Set-Cookie", SessionSetCookie(token, tls));
    res.set_redirect("/", 303);
  });
  srv.Post("/logout", [tls, from_this_site](const httplib::Request& req,
                                            httplib::Response& res) {
    if (!from_this_site(req, res)) return;
    res.set_header("Set-Cookie", SessionClearCookie(tls));
    res.set_redirect("/login", 303);
  });

  srv.Get("/api/session", [token, authorized](const httplib::Request& req,
                                              httplib::Response& res) {
    SendJson(res, json{{"token_required", !token.empty()},
                       {"can_act", !token.empty() && authorized(req)}});
  });
  srv.Get("/api/experiments", [api](const httplib::Request& req, httplib::Response& res) {
    SendJson(res, api->Experiments(/*include_cancelled=*/req.get_param_value("all") == "1"));
  });
  srv.Get(R"(/api/experiments/([^/]+))", [api](const httplib::Request& req,
                                                httplib::Response& res) {
    SendJson(res, api->Experiment(req.matches[1].str()));
  });
  srv.Get(R"(/api/runs/(\d+))", [api](const httplib::Request& req, httplib::Response& res) {
    int64_t run_id = 0, after = -1;
    if (!absl::SimpleAtoi(req.matches[1].str(), &run_id)) {
      // Digits only (the route says so): too many of them for a run id.
      return SendError(res, absl::NotFoundError(absl::StrCat(
                                "no run ", req.matches[1].str(), " (run ids go up to ",
                                std::numeric_limits<int64_t>::max(), ")")));
    }
    if (req.has_param("after_step") &&
        !absl::SimpleAtoi(req.get_param_value("after_step"), &after)) {
      return SendError(res, absl::InvalidArgumentError("after_step: give an integer step"));
    }
    SendJson(res, api->Run(run_id, after));
  });
  srv.Get("/api/workers", [api](const httplib::Request&, httplib::Response& res) {
    SendJson(res, api->Workers());
  });
  srv.Get("/api/changes", [api, changes_wait](const httplib::Request& req,
                                              httplib::Response& res) {
    uint64_t since = 0;
    if (req.has_param("since") && !absl::SimpleAtoi(req.get_param_value("since"), &since)) {
      return SendError(res, absl::InvalidArgumentError("since: give the last change counter"));
    }
    SendJson(res,
             api->Changes(since, req.has_param("since") ? changes_wait : absl::ZeroDuration()));
  });

  // Actions: only with the client token, and only from a script that says so
  // (a form on another site cannot set this header).
  auto act = [api, token, authorized](const httplib::Request& req, httplib::Response& res,
                                      bool experiment, bool cancel) {
    if (token.empty()) {
      return SendError(res, absl::PermissionDeniedError(
                                "the dashboard is read-only: start the coordinator with "
                                "--client-token-file to allow cancel and retry here"));
    }
    if (!authorized(req) || req.get_header_value("X-Smallem-Action") != "1") {
      return SendError(res, absl::UnauthenticatedError(
                                "cancel and retry need the client token and the header "
                                "X-Smallem-Action: 1"));
    }
    RunSelector selector;
    if (experiment) {
      absl::StatusOr<ExperimentRecord> e = api->FindExperiment(req.matches[1].str());
      if (!e.ok()) return SendError(res, e.status());
      selector.experiment_id = e->id;
    } else {
      int64_t run_id = 0;
      if (!absl::SimpleAtoi(req.matches[1].str(), &run_id)) {
        return SendError(res, absl::InvalidArgumentError("give a run id"));
      }
      selector.run_ids = {run_id};
    }
    SendJson(res, cancel ? api->Cancel(selector) : api->Retry(selector));
  };
  srv.Post(R"(/api/experiments/([^/]+)/(cancel|retry))",
           [act](const httplib::Request& req, httplib::Response& res) {
             act(req, res, true, req.matches[2].str() == "cancel");
           });
  srv.Post(R"(/api/runs/(\d+)/(cancel|retry))",
           [act](const httplib::Request& req, httplib::Response& res) {
             act(req, res, false, req.matches[2].str() == "cancel");
           });

  srv.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    absl::StatusOr<std::string> text = metrics ? metrics() : absl::UnavailableError("no metrics");
    if (!text.ok()) return SendError(res, text.status());
    res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace smallem
