// Who may read and act through the dashboard (docs/dashboard.md § Access).
// With a client token configured, every page, endpoint and /metrics needs
// it: as `Authorization: Bearer <token>` (scripts, Prometheus) or as the
// session cookie the login form sets (browsers). The cookie holds a digest
// of the token, never the token; it is HttpOnly, SameSite=Strict, and Secure
// over TLS. Without a client token the dashboard is open to read and offers
// no actions (read-only); actions need the token.
//
// Pure functions; thread-safe.
#ifndef SMALLEM_SERVER_HTTP_DASHBOARD_AUTH_H_
#define SMALLEM_SERVER_HTTP_DASHBOARD_AUTH_H_

#include <string>
#include <string_view>

namespace smallem {

inline constexpr char kSessionCookieName[] = "smallem_session";

// The session cookie's value for `token`: a SHA-256 digest, in hex.
std::string SessionCookieValue(std::string_view token);

// The Set-Cookie header of a login with `token` (Secure when `tls`).
std::string SessionSetCookie(std::string_view token, bool tls);
// The Set-Cookie header that ends a session.
std::string SessionClearCookie(bool tls);

// Whether a request with these header values ("" when absent) carries
// `token` (never true for an empty token). Compared in constant time.
bool RequestCarriesToken(std::string_view token, std::string_view authorization,
                         std::string_view cookie_header);

// Whether a state-changing request (login, logout, cancel, retry) comes
// from the dashboard's own pages, not a form or script on another site:
// it carries the header X-Smallem-Action: 1 (`action`; a cross-site form
// cannot set it), or the browser says Sec-Fetch-Site: same-origin
// (`fetch_site`), or, from a browser that does not send that, its Origin
// is this dashboard's own (`tls` picks the scheme, `host` is the Host
// header). A request with none of them (a bare script) is not.
bool RequestIsFromThisSite(bool tls, std::string_view host, std::string_view origin,
                           std::string_view fetch_site, std::string_view action);

}  // namespace smallem

#endif  // SMALLEM_SERVER_HTTP_DASHBOARD_AUTH_H_
