-- tests/openmetrics-promtool.lua WORKDIR -- Prometheus's own parsers read
-- perfmon.openmetrics's exposition of a snapshot with odd group names
-- (ctest openmetrics.promtool).
--
-- promtool (Debian's prometheus package) has two readers:
--   promtool check metrics   the Prometheus text format 0.0.4 parser and
--                            its linter.  It must parse the exposition
--                            (exit 1 is a parse error).  Its linter looks
--                            for HELP under the sample name, where
--                            OpenMetrics puts it under the family's
--                            (perfmon_ticks for perfmon_ticks_total): that
--                            "no help text", and only that, is allowed.
--   promtool tsdb create-blocks-from openmetrics
--                            the OpenMetrics parser Prometheus scrapes
--                            application/openmetrics-text with, strict
--                            about # EOF, UNIT suffixes, escapes.  It wants
--                            a timestamp on every sample, so one is added;
--                            the blocks it writes are dumped and each
--                            group's name must come back as written.

local workdir = assert(arg[1], "usage: openmetrics-promtool.lua WORKDIR")
local perfmon = require("perfmon")
local text_utf8 = require("perfmon.text").utf8

local function fail(msg)
  io.stderr:write("openmetrics.promtool: ", msg, "\n")
  os.exit(1)
end

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

if select(2, sh("command -v promtool")) ~= 0 then
  fail("promtool not found: apt-get install -y prometheus (tools/run installs it)")
end

-- Groups with odd names, each doing some work in events.
local NAMES = { "janky", 'say "hi"', "back\\slash", "two\nlines", "bad \255\254 bytes",
                "tab\tcr\r", "{,}= x", "ünïcödé ✓" }
local groups, spins = {}, {}
for i, name in ipairs(NAMES) do
  groups[i] = perfmon.group{ name = name, kind = i % 2 == 0 and "plugin" or "page \"x\"" }
  local env = setmetatable({}, { __index = _G })
  spins[i] = assert(perfmon.load("return function(ms) local t = os.clock() + ms / 1000 "
    .. "while os.clock() < t do end end", "=promtool/" .. i, env, groups[i]))()
end
local mon <close> = perfmon.monitor{ "jank", "ticks", "blocking" }
for round = 1, 3 do
  perfmon.event(function()
    for i, spin in ipairs(spins) do spin(i == 1 and 20 or 0.2 * round) end
  end)
end
local snap = mon:snapshot()
local text = perfmon.openmetrics(snap, { labels = { instance_name = "promtool \"test\"" } })

local path = workdir .. "/metrics.om"
local f = assert(io.open(path, "w"))
f:write(text)
f:close()

-- 1. The text format parser and linter
local out, code = sh("promtool check metrics < " .. q(path))
if code ~= 0 and code ~= 3 then
  fail(("promtool check metrics exited %d:\n%s"):format(code, out))
end
local lint = 0
for line in out:gmatch("[^\n]+") do
  local family = line:match("^(%S+)_total no help text$")
  if not family or not text:find("\n# HELP " .. family .. " ", 1, true) then
    fail("promtool check metrics: " .. line)
  end
  lint = lint + 1
end

-- 2. The OpenMetrics parser, through a backfill: a timestamp on each sample
local stamped = text:gsub("\n([^#\n][^\n]*)", "\n%1 1700000000")
if text:sub(1, 1) ~= "#" then fail("the exposition does not begin with metadata") end
path = workdir .. "/metrics-stamped.om"
f = assert(io.open(path, "w"))
f:write(stamped)
f:close()
local blocks = workdir .. "/blocks"
sh("rm -rf " .. q(blocks))
out, code = sh(("promtool tsdb create-blocks-from openmetrics %s %s"):format(q(path), q(blocks)))
if code ~= 0 then fail("the OpenMetrics parser refused the exposition:\n" .. out) end
sh("mkdir -p " .. q(blocks .. "/wal"))
out, code = sh("promtool tsdb dump " .. q(blocks))
if code ~= 0 then fail("promtool tsdb dump: " .. out) end

-- promtool prints label values as Go's strconv.Quote does
local function go_quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local esc = { ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ['"'] = '\\"', ["\\"] = "\\\\" }
    return esc[c] or ("\\x%02x"):format(c:byte())
  end) .. '"'
end

local series = 0
for _ in out:gmatch("\n?{__name__=") do series = series + 1 end
-- per group 39 series (2 cpu modes, 2 self modes, blocking, 4 of memory,
-- ticks, events, 2 of samples, 13 of each histogram), as many for the
-- process
local want_series = 39 * (#NAMES + 1)
if series ~= want_series then
  fail(("%d series in the blocks, expected %d:\n%s"):format(series, want_series, out))
end
for i, g in ipairs(groups) do
  local prefix = ('{__name__="perfmon_ticks_total", id="%d", instance_name="promtool \\"test\\"", kind=%s, name=%s} ')
    :format(g.id, go_quote(g.kind), go_quote(text_utf8(NAMES[i])))
  local value = out:match("\n" .. prefix:gsub("%p", "%%%0") .. "(%d+) ")
    or out:match("^" .. prefix:gsub("%p", "%%%0") .. "(%d+) ")
  if tonumber(value) ~= snap.groups[g.id].ticks then
    fail(("group %d: no series %s%d in the dump:\n%s"):format(
      g.id, prefix, snap.groups[g.id].ticks, out))
  end
end
print(("openmetrics.promtool: %d bytes, %d families read by the text parser (%d "
  .. "lint notes, all 'no help text' for _total samples); %d series through the "
  .. "OpenMetrics parser, every name back as written"):format(
  #text, select(2, text:gsub("\n# TYPE ", "")) + (text:sub(1, 7) == "# TYPE " and 1 or 0),
  lint, series))
