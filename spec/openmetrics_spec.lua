-- spec/openmetrics_spec.lua -- perfmon.openmetrics: a snapshot as an
-- OpenMetrics text exposition.  The exposition is read back here (lines,
-- label sets, values) and checked against the snapshot it came from and
-- against CPU time measured with os.clock; tests/openmetrics-promtool.lua
-- has Prometheus's own parsers read it.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")
local assert_near = truth.assert_near

local SPIN = "local function spin(ms) local t0 = os.clock() local t = t0 + ms / 1000 "
  .. "while os.clock() < t do end return (os.clock() - t0) * 1e6 end\n"

local seq = 0
local function plugin(name, kind)
  seq = seq + 1
  local g = perfmon.group{ name = name, kind = kind or "plugin" }
  local env = setmetatable({}, { __index = _G })
  local main = assert(perfmon.load(SPIN .. "return spin", ("=om/%d"):format(seq), env, g))
  return g, main()
end

-- The Go-free way back: unescapes a label value as OpenMetrics escapes it.
local function unescape(s)
  return (s:gsub("\\(.)", { n = "\n", ['"'] = '"', ["\\"] = "\\" }))
end

-- Reads an exposition: { families = { name = {type, unit, help} },
-- samples = { {name, labels = {k = v}, value} }, order = {family names} }.
local function parse(text)
  assert(text:sub(-6) == "# EOF\n", "does not end with # EOF")
  local r = { families = {}, samples = {}, order = {} }
  for line in text:gmatch("([^\n]*)\n") do
    local kind, fam, rest = line:match("^# (%u+) (%S+) (.*)$")
    if line == "# EOF" then
      break
    elseif kind then
      local f = r.families[fam]
      if not f then
        f = {}
        r.families[fam] = f
        r.order[#r.order + 1] = fam
      end
      assert(f[kind] == nil, "two " .. kind .. " lines for " .. fam)
      f[kind] = rest
    else
      local name, body, value = line:match('^([%w_]+){(.*)} (%S+)$')
      assert(name, "not a sample line: " .. line)
      local labels, pos = {}, 1
      while pos <= #body do
        -- a value ends at the first quote not escaped
        local s = body:find('"', pos, true) + 1
        local i = s
        while true do
          local c = body:sub(i, i)
          if c == "\\" then i = i + 2
          elseif c == '"' then break
          else i = i + 1 end
        end
        local k, v, e = body:sub(pos, s - 3), body:sub(s, i - 1), i + 1
        labels[k] = unescape(v)
        pos = e + (body:sub(e, e) == "," and 1 or 0)
      end
      r.samples[#r.samples + 1] = { name = name, labels = labels, value = tonumber(value) }
    end
  end
  return r
end

local function find(r, name, want)
  local found
  for _, s in ipairs(r.samples) do
    if s.name == name then
      local ok = true
      for k, v in pairs(want) do ok = ok and s.labels[k] == v end
      if ok then
        assert(found == nil, "two samples match " .. name)
        found = s
      end
    end
  end
  assert(found, "no sample " .. name)
  return found.value
end

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  return err
end

describe("perfmon.openmetrics", function()

  it("writes every group's counters and histogram, and the process's", function()
    truth.alone(pending)
    local janky, jspin = plugin("janky")
    local cheap, cspin = plugin("cheap")
    local idle = plugin("idle", "page")
    local mon <close> = perfmon.monitor{ "jank", "ticks", "blocking" }
    -- the process counts since monitoring first began in this state
    local process_events = mon:snapshot().process.events
    local spent = 0
    for i = 1, 6 do
      perfmon.event(function()
        spent = spent + jspin(i <= 2 and 20 or 5)
        cspin(0.05)
      end)
    end
    local snap = mon:snapshot()
    local r = parse(perfmon.openmetrics(snap))
    -- OpenMetrics metadata: TYPE, UNIT (suffix of the name), HELP
    local want = {
      cpu_seconds = "counter", self_cpu_seconds = "counter", blocking_seconds = "counter",
      ticks = "counter", events = "counter", event_cpu_seconds = "histogram",
      event_self_cpu_seconds = "histogram", alloc_bytes = "counter",
      self_alloc_bytes = "counter", allocs = "counter", self_allocs = "counter",
      stack_samples = "counter", self_stack_samples = "counter",
    }
    for base, mtype in pairs(want) do
      for _, fam in ipairs{ "perfmon_" .. base, "perfmon_process_" .. base } do
        local f = r.families[fam]
        assert(f, "no family " .. fam)
        assert.equals(mtype, f.TYPE)
        assert.is_truthy(f.HELP)
        if fam:match("_seconds$") then assert.equals("seconds", f.UNIT) end
      end
    end
    assert.equals(26, #r.order)
    for _, g in ipairs{ janky, cheap, idle } do
      local st = snap.groups[g.id]
      local l = { name = g.name, id = tostring(g.id), kind = g.kind }
      local function v(name, extra)
        local w = { name = l.name, id = l.id, kind = l.kind }
        for k, x in pairs(extra or {}) do w[k] = x end
        return find(r, name, w)
      end
      assert.equals(st.user_us / 1e6, v("perfmon_cpu_seconds_total", { mode = "user" }))
      assert.equals(st.system_us / 1e6, v("perfmon_cpu_seconds_total", { mode = "system" }))
      assert.equals(st.self_user_us / 1e6, v("perfmon_self_cpu_seconds_total", { mode = "user" }))
      assert.equals(st.self_system_us / 1e6,
        v("perfmon_self_cpu_seconds_total", { mode = "system" }))
      assert.equals(st.self_event_us / 1e6, v("perfmon_event_self_cpu_seconds_sum"))
      assert.equals(st.events, v("perfmon_event_self_cpu_seconds_count"))
      assert.equals(st.alloc_bytes, v("perfmon_alloc_bytes_total"))
      assert.equals(st.self_alloc_count, v("perfmon_self_allocs_total"))
      assert.equals(st.blocking_us / 1e6, v("perfmon_blocking_seconds_total"))
      assert.equals(st.ticks, v("perfmon_ticks_total"))
      assert.equals(st.samples, v("perfmon_stack_samples_total"))
      assert.equals(st.self_samples, v("perfmon_self_stack_samples_total"))
      assert.equals(st.events, v("perfmon_events_total"))
      assert.equals(st.events, v("perfmon_event_cpu_seconds_count"))
      assert.equals(st.event_us / 1e6, v("perfmon_event_cpu_seconds_sum"))
      assert.equals(st.events, v("perfmon_event_cpu_seconds_bucket", { le = "+Inf" }))
    end
    -- the janky plugin: 2 events of 20 ms (16..32), 4 of 5 ms (4..8)
    local function bucket(le)
      return find(r, "perfmon_event_cpu_seconds_bucket", { id = tostring(janky.id), le = le })
    end
    local BOUNDS = { "0.001", "0.002", "0.004", "0.008", "0.016", "0.032",
                     "0.064", "0.128", "0.256", "0.512" }
    local prev = 0
    for _, le in ipairs(BOUNDS) do
      assert(bucket(le) >= prev, "buckets not cumulative at " .. le)
      prev = bucket(le)
    end
    assert.equals(0, bucket("0.004"))
    assert.equals(4, bucket("0.008"))
    assert.equals(4, bucket("0.016"))
    assert.equals(6, bucket("0.032"))
    assert.equals(6, bucket("+Inf"))
    -- by id: another spec's group of that name may be alive in this state
    assert_near(find(r, "perfmon_event_cpu_seconds_sum", { id = tostring(janky.id) }) * 1e6, spent,
      "janky's _sum")
    -- the cheap plugin ran in 6 events, each under a millisecond
    assert.equals(6, find(r, "perfmon_event_cpu_seconds_bucket", { id = tostring(cheap.id), le = "0.001" }))
    assert.equals(0, find(r, "perfmon_events_total", { id = tostring(idle.id) }))
    -- the process: no group labels
    local cpu = find(r, "perfmon_process_cpu_seconds_total", { mode = "user" })
      + find(r, "perfmon_process_cpu_seconds_total", { mode = "system" })
    assert(math.abs(cpu - snap.process.cpu_us / 1e6) < 1e-5, "process cpu")
    assert.equals(process_events + 6, find(r, "perfmon_process_events_total", {}))
    for _, s in ipairs(r.samples) do
      if s.name:match("^perfmon_process_") then assert.is_nil(s.labels.name) end
    end
  end)

  it("escapes any bytes a name holds, and writes valid UTF-8", function()
    local names = { 'say "hi"', "back\\slash", "two\nlines", "bad \255\254 bytes",
                    "tab\tcr\r", "{,}=", "ünïcödé ✓" }
    local groups = {}
    for i, n in ipairs(names) do groups[i] = perfmon.group{ name = n, kind = "k\"\n\\" } end
    local mon <close> = perfmon.monitor{ "ticks" }
    local text = perfmon.openmetrics(mon:snapshot())
    assert(utf8.len(text), "not valid UTF-8")
    local r = parse(text)
    for i, g in ipairs(groups) do
      local want = require("perfmon.text").utf8(names[i])
      assert.equals(0, find(r, "perfmon_ticks_total", { id = tostring(g.id), name = want, kind = "k\"\n\\" }))
    end
    -- no raw newline inside a line: every line is metadata or a sample
    for line in text:gmatch("([^\n]*)\n") do
      assert(line:match("^# ") or line:match("^perfmon_[%w_]+{"), "stray line: " .. line)
    end
  end)

  it("takes a prefix and constant labels", function()
    perfmon.group{ name = "lbl", kind = "plugin" }
    local mon <close> = perfmon.monitor{ "ticks" }
    local snap = mon:snapshot()
    local r = parse(perfmon.openmetrics(snap, { prefix = "editor_", labels = { host = 'a"b', pid = 42 } }))
    assert.is_truthy(r.families.editor_ticks)
    assert.is_truthy(r.families.editor_process_event_cpu_seconds)
    assert.is_nil(r.families.perfmon_ticks)
    for _, s in ipairs(r.samples) do
      assert.equals('a"b', s.labels.host)
      assert.equals("42", s.labels.pid)
    end
    local r2 = parse(perfmon.openmetrics(snap, { prefix = "" }))
    assert.is_truthy(r2.families.process_cpu_seconds)
  end)

  it("writes a difference of snapshots too", function()
    truth.alone(pending)
    local mon <close> = perfmon.monitor{ "jank" }
    local s0 = mon:snapshot()
    perfmon.event(function() end)
    local d = mon:snapshot():subtract(s0)
    local r = parse(perfmon.openmetrics(d))
    assert.equals(1, find(r, "perfmon_process_events_total", {}))
  end)

  it("raises on bad arguments, naming them", function()
    local mon <close> = perfmon.monitor{ "ticks" }
    local snap = mon:snapshot()
    local function err(...) return error_of(perfmon.openmetrics, ...) end
    assert.matches("bad argument #1 to 'perfmon.openmetrics' %(snapshot expected, got nil%)", err(nil))
    assert.matches("bad argument #1 to 'perfmon.openmetrics' %(snapshot expected, got table%)", err({}))
    assert.matches("bad argument #2 to 'perfmon.openmetrics' %(table expected, got string%)", err(snap, "x"))
    assert.matches("unknown option 'prefx' %(options: labels, prefix%)", err(snap, { prefx = "a" }))
    assert.matches("option 'prefix': string expected, got number", err(snap, { prefix = 1 }))
    assert.matches("option 'prefix': \"1a_\" is not the start of a metric name", err(snap, { prefix = "1a_" }))
    assert.matches("option 'prefix': \"a:b\"", err(snap, { prefix = "a:b" }))
    assert.matches("option 'prefix': \"_a\"", err(snap, { prefix = "_a" }))
    assert.matches("option 'labels': table expected, got string", err(snap, { labels = "a" }))
    assert.matches("option 'labels': \"a%-b\" is not a label name", err(snap, { labels = { ["a-b"] = "x" } }))
    assert.matches("option 'labels': 1 is not a label name", err(snap, { labels = { "x" } }))
    assert.matches("label name \"__x\" is reserved", err(snap, { labels = { __x = "x" } }))
    assert.matches("perfmon writes the label \"name\" itself", err(snap, { labels = { name = "x" } }))
    assert.matches("perfmon writes the label \"le\" itself", err(snap, { labels = { le = "x" } }))
    assert.matches("label \"a\" must be a string or a number, got table", err(snap, { labels = { a = {} } }))
    -- the error names the caller's line
    local line = debug.getinfo(1, "l").currentline
    local e1 = error_of(function() perfmon.openmetrics(snap, { prefix = 1 }) end)
    local e2 = error_of(function() perfmon.openmetrics(42) end)
    assert.matches("openmetrics_spec.lua:" .. (line + 1) .. ":", e1)
    assert.matches("openmetrics_spec.lua:" .. (line + 2) .. ":", e2)
  end)
end)
