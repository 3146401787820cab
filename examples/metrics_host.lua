-- examples/metrics_host.lua [SECONDS] -- a host whose plugins Prometheus
-- watches: it runs two plugins in its event loop, each in its own group,
-- and serves GET /metrics with perfmon.openmetrics(mon:snapshot())
-- (docs/openmetrics.md).
--
--   janky   burns ~80 ms of CPU in every event it handles
--   cheap   does a few table operations in every event
--
-- It listens on 127.0.0.1, on a port the system picks, and prints
-- "metrics_host: listening on 127.0.0.1:PORT" once it serves; it runs for
-- SECONDS (default 60), or until killed.  Needs lua-socket.
--
--   LUA_PATH_5_4='lua/?.lua;lua/?/init.lua;;' LUA_CPATH_5_4='build/?.so;;' \
--     lua5.4 examples/metrics_host.lua

local socket = require("socket")
local perfmon = require("perfmon")

local seconds = tonumber(arg[1] or 60) or error("usage: metrics_host.lua [SECONDS]")

local PLUGINS = {
  janky = [[
    local clock = os.clock
    return function()
      local t = clock() + 0.080
      while clock() < t do end
    end]],
  cheap = [[
    local seen = {}
    return function(n)
      seen[#seen + 1] = n
      if #seen > 100 then seen = {} end
    end]],
}

-- Each plugin in its own sandbox and group, as a host loads them.
local handlers = {}
for _, name in ipairs{ "janky", "cheap" } do
  local group = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  local main = assert(perfmon.load(PLUGINS[name], "=plugins/" .. name .. ".lua", env, group))
  handlers[name] = main()
end

local server = assert(socket.bind("127.0.0.1", 0))
server:settimeout(0)
local _, port = server:getsockname()

local mon <close> = perfmon.monitor{ "jank", "ticks", "blocking" }

local CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"

-- Answers one request on client: /metrics, or 404.
local function serve(client)
  client:settimeout(1)
  local line = client:receive("*l")
  repeat -- the headers, up to the empty line
    local h = client:receive("*l")
  until h == nil or h == ""
  local status, ctype, body
  if line and line:match("^GET /metrics[ ?]") then
    status, ctype, body = "200 OK", CONTENT_TYPE, perfmon.openmetrics(mon:snapshot())
  else
    status, ctype, body = "404 Not Found", "text/plain; charset=utf-8", "not found\n"
  end
  client:send(("HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
    .. "Connection: close\r\n\r\n%s"):format(status, ctype, #body, body))
  client:close()
end

print(("metrics_host: listening on 127.0.0.1:%d"):format(port))
io.stdout:flush()

local deadline = socket.gettime() + seconds
local n = 0
while socket.gettime() < deadline do
  n = n + 1
  -- one event: the cheap plugin each time, the janky one every other time
  perfmon.event(function()
    handlers.cheap(n)
    if n % 2 == 0 then handlers.janky() end
  end)
  -- between events, as a host's idle wait: scrapes, then a short sleep
  local client = server:accept()
  while client do
    serve(client)
    client = server:accept()
  end
  socket.sleep(0.02)
end
server:close()
