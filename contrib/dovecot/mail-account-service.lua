-- Dovecot passdb and userdb through the mail account service (docs/dovecot.md).
--
-- One script for Dovecot 2.3 (Debian 12) and 2.4 (Debian 13): Dovecot puts its own version in the
-- environment of its processes (DOVECOT_VERSION), and the script picks the 2.3 or the 2.4 names
-- of the settings it hands over (MailCrypt keys, quota) and of the HTTP client's options from it.
-- Needs Debian's dovecot-auth-lua (Dovecot's Lua with its HTTP client, dovecot.http) and lua-cjson.
--
-- Environment (pass it with import_environment, see the snippets beside this file):
--   SERVICE_URL      base URL of the service, e.g. https://accounts.example.org (a path prefix is kept)
--   SERVICE_TOKEN    API token with scope mailbox-server
--   SERVICE_TIMEOUT  per request, e.g. 5s or 800ms (default 5s)
--
-- Answers of the service and what Dovecot is told:
--   200                                       success (userdb fields, MailCrypt keys)
--   401 "authentication failed"               wrong password
--   404 "user not found"                      unknown user
--   403 "user disabled due to spam role"      user disabled
--   403 "user password change required"       password expired
--   anything else: unreachable, timeout, 5xx, 429, a refused token, a malformed answer
--                                             temporary failure, never "wrong password"

local json = require("cjson.safe")

local TEMPFAIL_PASSDB = dovecot.auth.PASSDB_RESULT_INTERNAL_FAILURE
local TEMPFAIL_USERDB = dovecot.auth.USERDB_RESULT_INTERNAL_FAILURE

local config -- filled by script_init
local client -- dovecot.http client, made by script_init

-- "2.3.19.1" -> 2.3 names; 2.4 and later -> 2.4 names. MAIL_ACCOUNT_DOVECOT_SETTINGS=2.3|2.4
-- overrides (for a Dovecot that does not export its version).
local function settings_generation()
  local forced = os.getenv("MAIL_ACCOUNT_DOVECOT_SETTINGS")
  if forced == "2.3" or forced == "2.4" then return forced end
  local major, minor = string.match(os.getenv("DOVECOT_VERSION") or "", "^(%d+)%.(%d+)")
  major, minor = tonumber(major), tonumber(minor)
  if major == nil then return nil end
  if major > 2 or (major == 2 and minor >= 4) then return "2.4" end
  return "2.3"
end

-- "5s", "800ms", "1.5s" -> milliseconds; nil when it does not parse.
local function milliseconds(text)
  local number, unit = string.match(text, "^(%d+%.?%d*)(m?s)$")
  if number == nil then return nil end
  local value = tonumber(number) * (unit == "s" and 1000 or 1)
  if value < 1 then return nil end
  return math.floor(value)
end

-- Path segment: everything but unreserved characters and "@" percent-encoded, so that an address
-- with "/", "?", "#", "%" or "+" reaches the service as the one address it is.
local function path_segment(text)
  return (string.gsub(text, "[^%w%-%._~@]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

local function read_config()
  local url = os.getenv("SERVICE_URL") or ""
  local token = os.getenv("SERVICE_TOKEN") or ""
  local timeout = os.getenv("SERVICE_TIMEOUT") or ""
  if timeout == "" then timeout = "5s" end
  local problems = {}
  url = string.gsub(url, "/+$", "")
  if not string.match(url, "^https?://[^/]+") then
    table.insert(problems, "SERVICE_URL must be the service's http:// or https:// base URL")
  end
  if token == "" then table.insert(problems, "SERVICE_TOKEN (scope mailbox-server) is not set") end
  local timeout_ms = milliseconds(timeout)
  if timeout_ms == nil then table.insert(problems, "SERVICE_TIMEOUT must look like 5s or 800ms") end
  local generation = settings_generation()
  if generation == nil then
    table.insert(problems, "cannot tell the Dovecot version (DOVECOT_VERSION is not set); set " ..
      "MAIL_ACCOUNT_DOVECOT_SETTINGS to 2.3 or 2.4")
  end
  if #problems > 0 then return nil, table.concat(problems, "; ") end
  return {
    api = url .. "/api/mailbox-server/",
    token = token,
    timeout_ms = timeout_ms,
    generation = generation,
  }
end

local function make_client()
  -- One attempt per lookup: Dovecot's client would otherwise retry a refused connection until
  -- the timeout, and a retried password check costs the service another Argon2 run.
  if config.generation == "2.4" then
    return dovecot.http.client({
      user_agent = "mail-account-service-dovecot",
      request_timeout = config.timeout_ms .. "ms",
      request_max_attempts = 1,
      max_connect_attempts = 1,
    })
  end
  return dovecot.http.client({
    user_agent = "mail-account-service-dovecot",
    request_timeout_msecs = config.timeout_ms,
    max_attempts = 1,
    max_connect_attempts = 1,
  })
end

-- One request to the service: returns status (Dovecot's client reports transport failures as
-- statuses of 9000 and above), the decoded JSON body or nil, and the raw reason for logs.
local function call(method, path, body, client_address)
  local request = client:request({ url = config.api .. path, method = method })
  request:add_header("Authorization", "Bearer " .. config.token)
  request:add_header("Accept", "application/json")
  if client_address ~= nil and client_address ~= "" then
    -- The service's sign-in throttling counts failures per client address across every door.
    request:add_header("X-Client-Address", client_address)
  end
  if body ~= nil then
    request:add_header("Content-Type", "application/json")
    request:set_payload(json.encode(body))
  end
  local response = request:submit()
  local status = response:status()
  local decoded = json.decode(response:payload() or "")
  if type(decoded) ~= "table" then decoded = nil end
  return status, decoded, response:reason()
end

local function message_of(decoded)
  if decoded ~= nil and type(decoded.message) == "string" then return decoded.message end
  return ""
end

-- A failure that is not the user's: temporary for the client; the text returned is what Dovecot
-- logs as the lookup's error for the operator.
local function unexpected(what, status, decoded, reason)
  local detail = message_of(decoded)
  if detail == "" then detail = reason or "" end
  if status == 401 or status == 403 then
    detail = detail .. " (is SERVICE_TOKEN a token with scope mailbox-server?)"
  elseif status == 404 then
    detail = detail .. " (is SERVICE_URL the service's base URL?)"
  elseif status >= 9000 then
    detail = "service unreachable: " .. detail
  end
  return string.format("%s: status %d: %s", what, status, detail)
end

function script_init()
  local problem
  config, problem = read_config()
  if config == nil then
    dovecot.i_error("mail-account-service: " .. problem)
    return 1
  end
  client = make_client()
  -- Start-up check: a wrong URL or token stops the auth process with a clear error; a service that
  -- is down or not ready only warns, since every lookup fails temporarily until it is back and a
  -- crashing auth process would be throttled by Dovecot's master for longer than the outage.
  local request = client:request({ url = config.api .. "status", method = "GET" })
  request:add_header("Authorization", "Bearer " .. config.token)
  local response = request:submit()
  local status = response:status()
  if status == 200 then return 0 end
  local decoded = json.decode(response:payload() or "")
  local detail = (type(decoded) == "table" and type(decoded.message) == "string") and decoded.message
    or response:reason() or ""
  if status == 401 or status == 403 or status == 404 then
    dovecot.i_error(string.format("mail-account-service: status check %s: %d %s (check SERVICE_URL " ..
      "and that SERVICE_TOKEN has scope mailbox-server)", config.api .. "status", status, detail))
    return 1
  end
  dovecot.i_warning(string.format("mail-account-service: status check %s: %d %s; lookups fail " ..
    "temporarily until the service answers", config.api .. "status", status, detail))
  return 0
end

local function userdb_fields(body)
  local fields = { user = body.user }
  local with_crypt = tonumber(body.mailCrypt) == 2 and body.mailCryptPublicKey ~= ""
  if config.generation == "2.4" then
    if body.quota ~= "" then fields["quota_storage_size"] = body.quota end
    if with_crypt then fields["crypt_global_public_key_file"] = "inline:" .. body.mailCryptPublicKey end
  else
    if body.quota ~= "" then fields["quota_rule"] = "*:storage=" .. body.quota end
    if with_crypt then
      fields["mail_crypt_save_version"] = "2"
      fields["mail_crypt_global_public_key"] = body.mailCryptPublicKey
    end
  end
  return fields
end

-- The private key goes to the user's mail processes only (userdb_ prefix), for this login.
local function passdb_fields(body)
  local fields = {}
  if tonumber(body.mailCrypt) ~= 2 or body.mailCryptPrivateKey == "" then return fields end
  if config.generation == "2.4" then
    fields["userdb_crypt_global_public_key_file"] = "inline:" .. body.mailCryptPublicKey
    fields["userdb_crypt_global_private_key"] = "main"
    fields["userdb_crypt_global_private_key/main/crypt_private_key_file"] = "inline:" ..
      body.mailCryptPrivateKey
  else
    fields["userdb_mail_crypt_save_version"] = "2"
    fields["userdb_mail_crypt_global_public_key"] = body.mailCryptPublicKey
    fields["userdb_mail_crypt_global_private_key"] = body.mailCryptPrivateKey
  end
  return fields
end

local function is_string(value) return type(value) == "string" end

function auth_userdb_lookup(request)
  local status, decoded, reason = call("GET", path_segment(request.user), nil, nil)
  if status == 200 then
    local body = decoded and decoded.body
    if type(body) ~= "table" or not is_string(body.user) or not is_string(body.quota) or
        body.mailCrypt == nil or not is_string(body.mailCryptPublicKey) then
      return TEMPFAIL_USERDB, "userdb: malformed answer from the service"
    end
    return dovecot.auth.USERDB_RESULT_OK, userdb_fields(body)
  end
  if status == 404 and message_of(decoded) == "user not found" then
    return dovecot.auth.USERDB_RESULT_USER_UNKNOWN, ""
  end
  return TEMPFAIL_USERDB, unexpected("userdb", status, decoded, reason)
end

function auth_password_verify(request, password)
  local status, decoded, reason = call("POST", path_segment(request.user), { password = password },
    request.remote_ip)
  local message = message_of(decoded)
  if status == 200 then
    local body = decoded and decoded.body
    if type(body) ~= "table" or body.mailCrypt == nil or not is_string(body.mailCryptPrivateKey) or
        not is_string(body.mailCryptPublicKey) then
      return TEMPFAIL_PASSDB, "passdb: malformed answer from the service"
    end
    return dovecot.auth.PASSDB_RESULT_OK, passdb_fields(body)
  end
  if status == 401 and message == "authentication failed" then
    return dovecot.auth.PASSDB_RESULT_PASSWORD_MISMATCH, ""
  end
  if status == 404 and message == "user not found" then
    return dovecot.auth.PASSDB_RESULT_USER_UNKNOWN, ""
  end
  if status == 403 and message == "user disabled due to spam role" then
    return dovecot.auth.PASSDB_RESULT_USER_DISABLED, ""
  end
  if status == 403 and message == "user password change required" then
    return dovecot.auth.PASSDB_RESULT_PASS_EXPIRED, ""
  end
  return TEMPFAIL_PASSDB, unexpected("passdb", status, decoded, reason)
end

function script_deinit()
  return 0
end
