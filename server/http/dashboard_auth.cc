#include "server/http/dashboard_auth.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/sha256.h"
#include "rpc/auth.h"

namespace smallem {

std::string SessionCookieValue(std::string_view token) {
  return Sha256Hex(
      absl::StrCat("smallem-dashboard-session:", absl::string_view(token.data(), token.size())));
}

std::string SessionSetCookie(std::string_view token, bool tls) {
  return absl::StrCat(kSessionCookieName, "=", SessionCookieValue(token),
                      "; Path=/; HttpOnly; SameSite=Strict", tls ? "; Secure" : "");
}

std::string SessionClearCookie(bool tls) {
  return absl::StrCat(kSessionCookieName, "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict",
                      tls ? "; Secure" : "");
}

bool RequestCarriesToken(std::string_view token, std::string_view authorization,
                         std::string_view cookie_header) {
  if (token.empty()) return false;
  absl::string_view bearer(authorization.data(), authorization.size());
  if (absl::ConsumePrefix(&bearer, "Bearer ") &&
      TokensEqual(std::string_view(bearer.data(), bearer.size()), token)) {
    return true;
  }
  const std::string expected = SessionCookieValue(token);
  const absl::string_view cookies(cookie_header.data(), cookie_header.size());
  for (absl::string_view cookie : absl::StrSplit(cookies, ';')) {
    cookie = absl::StripAsciiWhitespace(cookie);
    if (absl::ConsumePrefix(&cookie, kSessionCookieName) && absl::ConsumePrefix(&cookie, "=") &&
        TokensEqual(std::string_view(cookie.data(), cookie.size()), expected)) {
      return true;
    }
  }
  return false;
}

bool RequestIsFromThisSite(bool tls, std::string_view host, std::string_view origin,
                           std::string_view fetch_site, std::string_view action) {
  if (action == "1") return true;
  // Set by the browser, never by a page: it decides where it is sent (and
  // holds behind a proxy that terminates TLS, where Origin's scheme is not ours).
  if (!fetch_site.empty()) return fetch_site == "same-origin";
  if (!origin.empty()) {
    return !host.empty() &&
           origin == absl::StrCat(tls ? "https://" : "http://",
                                  absl::string_view(host.data(), host.size()));
  }
  return fetch_site == "same-origin";
}

}  // namespace smallem
