// The login form says when the token given was wrong (/login?failed=1).
"use strict";
if (new URLSearchParams(location.search).has("failed")) {
  document.getElementById("failed").hidden = false;
}
