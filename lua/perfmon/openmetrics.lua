--- perfmon.openmetrics: a snapshot as an OpenMetrics text exposition, for
-- Prometheus and the other systems that scrape it (docs/openmetrics.md).
--
-- Every value of a snapshot is a total since monitoring began, so each one
-- is a counter, and the durations histogram with its events and event_us is
-- a histogram: its buckets are cumulative counts of events under each bound.
-- Groups and the process go to separate families (perfmon_cpu_seconds and
-- perfmon_process_cpu_seconds): a family's series must add up to something
-- meaningful, and the process already holds every group's time.  User and
-- system time are one family with a mode label, as node_exporter's
-- node_cpu_seconds_total: their sum is the CPU time.

local args = require("perfmon.args")
local text_utf8 = require("perfmon.text").utf8
local core = require("perfmon.loader")
local module = require("perfmon.module")

local openmetrics = {}

-- A group's figures as the core lists them (perfmon.figures): the
-- counters a stats record holds, and its histograms' number of buckets.
local COUNTERS, NBUCKETS = {}, nil
for _, f in ipairs(core.figures) do
  if f.kind == "histogram" then NBUCKETS = f.buckets else COUNTERS[#COUNTERS + 1] = f.name end
end

-- durations[k] counts the events of at least 2^(k-1) ms: the bounds in
-- seconds, rendered as OpenMetrics' canonical numbers (Go's %g, ".0" added
-- to an integer).
local BOUNDS = {}
for k = 1, NBUCKETS do
  local s = ("%g"):format(2 ^ (k - 1) / 1000)
  if not s:find("[.e]") then s = s .. ".0" end
  BOUNDS[k] = s
end

-- Labels perfmon writes itself, which opts.labels cannot take.
local OWN_LABELS = { name = true, kind = true, id = true, mode = true, le = true }
local OPTIONS = { prefix = true, labels = true }

-- A label value: valid UTF-8, with the three escapes OpenMetrics defines.
local ESCAPES = { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }
local function label_value(s)
  return (text_utf8(s):gsub('[\\"\n]', ESCAPES))
end

local function seconds(us) return ("%.6f"):format(us / 1e6) end

local function count(n) return ("%d"):format(n) end

-- A series' labels with one more (mode, le) after them.
local function with(labels, label)
  return labels == "" and label or labels .. "," .. label
end

----------------------------------------------------------------------------
-- Arguments
----------------------------------------------------------------------------

-- An error in opts, raised from check_options (depth 3: it, encode and
-- opt_error lie between the user and args.error) or from a helper it calls
-- (depth 4).
local function opt_error(msg, depth) args.error(2, "perfmon.openmetrics", msg, depth or 4) end

local function check_prefix(prefix)
  if prefix == nil then return "perfmon_" end
  if type(prefix) ~= "string" then
    opt_error("option 'prefix': string expected, got " .. type(prefix))
  end
  -- a name begins with a letter; colons are for recording rules and a
  -- leading underscore is reserved (OpenMetrics, "MetricFamily")
  if prefix ~= "" and not prefix:match("^[A-Za-z][A-Za-z0-9_]*$") then
    opt_error(("option 'prefix': %q is not the start of a metric name "
      .. "(a letter, then letters, digits, underscores)"):format(prefix))
  end
  return prefix
end

-- Returns the extra labels as one rendered string: ',k="v"...', sorted.
local function check_labels(labels)
  if labels == nil then return "" end
  if type(labels) ~= "table" then
    opt_error("option 'labels': table expected, got " .. type(labels))
  end
  local names = {}
  for k, v in pairs(labels) do
    if type(k) ~= "string" or not k:match("^[A-Za-z_][A-Za-z0-9_]*$") then
      opt_error(("option 'labels': %s is not a label name (a letter or "
        .. "underscore, then letters, digits, underscores)"):format(
        type(k) == "string" and ("%q"):format(k) or tostring(k)))
    end
    if k:sub(1, 2) == "__" then
      opt_error(("option 'labels': label name %q is reserved (it begins "
        .. "with two underscores)"):format(k))
    end
    if OWN_LABELS[k] then
      opt_error(("option 'labels': perfmon writes the label %q itself"):format(k))
    end
    if type(v) ~= "string" and type(v) ~= "number" then
      opt_error(("option 'labels': label %q must be a string or a number, got %s")
        :format(k, type(v)))
    end
    names[#names + 1] = k
  end
  table.sort(names)
  local out = {}
  for i, k in ipairs(names) do
    out[i] = (',%s="%s"'):format(k, label_value(tostring(labels[k])))
  end
  return table.concat(out)
end

local function check_options(opts)
  if opts == nil then return "perfmon_", "" end
  if type(opts) ~= "table" then opt_error("table expected, got " .. type(opts), 3) end
  for k in pairs(opts) do
    if not OPTIONS[k] then
      opt_error(("unknown option %s (options: labels, prefix)"):format(
        type(k) == "string" and ("'%s'"):format(k) or tostring(k)), 3)
    end
  end
  return check_prefix(opts.prefix), check_labels(opts.labels)
end

-- Whether st holds the numbers a stats record of a snapshot holds.
local function is_stats(st)
  if type(st) ~= "table" or type(st.durations) ~= "table"
    or type(st.self_durations) ~= "table" then return false end
  for _, f in ipairs(COUNTERS) do
    if math.type(st[f]) ~= "integer" then return false end
  end
  for k = 1, NBUCKETS do
    if math.type(st.durations[k]) ~= "integer"
      or math.type(st.self_durations[k]) ~= "integer" then return false end
  end
  return true
end

local function check_snapshot(snap)
  if type(snap) ~= "table" then
    args.error(1, "perfmon.openmetrics", "snapshot expected, got " .. type(snap), 2)
  end
  local ok = is_stats(snap.process) and type(snap.groups) == "table"
  for _, st in pairs(ok and snap.groups or {}) do
    ok = ok and is_stats(st) and type(st.name) == "string"
      and type(st.kind) == "string" and math.type(st.id) == "integer"
  end
  if not ok then
    args.error(1, "perfmon.openmetrics", "snapshot expected, got a table that is not "
      .. "one (no events or event_us: a snapshot of this perfmon?)", 2)
  end
end

----------------------------------------------------------------------------
-- Families
----------------------------------------------------------------------------

-- A counter of one stats field, as written by convert (seconds or count).
local function total(field, convert)
  return function(out, name, labels, st)
    out[#out + 1] = ("%s_total{%s} %s\n"):format(name, labels, convert(st[field]))
  end
end

-- A CPU time counter by mode, from the stats fields <field>user_us and
-- <field>system_us.
local function by_mode(field)
  return function(out, name, labels, st)
    out[#out + 1] = ("%s_total{%s} %s\n"):format(
      name, with(labels, 'mode="user"'), seconds(st[field .. "user_us"]))
    out[#out + 1] = ("%s_total{%s} %s\n"):format(
      name, with(labels, 'mode="system"'), seconds(st[field .. "system_us"]))
  end
end

-- A histogram of CPU time per event from the stats' buckets (durations or
-- self_durations) and sum (event_us or self_event_us).
local function per_event(buckets, sum)
  return function(out, name, labels, st)
    -- buckets[k] counts the events of 2^(k-1) ms or more; the rest are
    -- under that bound
    for k = 1, NBUCKETS do
      out[#out + 1] = ("%s_bucket{%s} %s\n"):format(
        name, with(labels, ('le="%s"'):format(BOUNDS[k])),
        count(st.events - st[buckets][k]))
    end
    out[#out + 1] = ("%s_bucket{%s} %s\n"):format(
      name, with(labels, 'le="+Inf"'), count(st.events))
    out[#out + 1] = ("%s_count{%s} %s\n"):format(name, labels, count(st.events))
    out[#out + 1] = ("%s_sum{%s} %s\n"):format(name, labels, seconds(st[sum]))
  end
end

-- The families, in order: name (after the prefix and "process_"), type,
-- unit, help, and write(out, family name, labels, stats), which adds the
-- samples of one series.
local FAMILIES = {
  { "cpu_seconds", "counter", "seconds",
    "CPU time with the group on the stack (inclusive), by mode (user, system); rank by self_cpu_seconds",
    by_mode("") },
  { "self_cpu_seconds", "counter", "seconds",
    "CPU time in the innermost frame (self time), by mode (user, system)",
    by_mode("self_") },
  { "blocking_seconds", "counter", "seconds",
    "Wall time spent in declared blocking calls", total("blocking_us", seconds) },
  { "alloc_bytes", "counter", "bytes",
    "Memory allocated, with the memory probe", total("alloc_bytes", count) },
  { "self_alloc_bytes", "counter", "bytes",
    "Memory allocated in the innermost frame (self), with the memory probe",
    total("self_alloc_bytes", count) },
  { "allocs", "counter", nil,
    "Blocks allocated, with the memory probe", total("alloc_count", count) },
  { "self_allocs", "counter", nil,
    "Blocks allocated in the innermost frame (self), with the memory probe",
    total("self_alloc_count", count) },
  { "ticks", "counter", nil,
    "Times execution entered (for the process: events, with the ticks probe)",
    total("ticks", count) },
  { "events", "counter", nil,
    "Events run in, with the jank probe", total("events", count) },
  { "stack_samples", "counter", nil,
    "Samples its CPU time is made of, in sampled mode (for the process: every sample)",
    total("samples", count) },
  { "self_stack_samples", "counter", nil,
    "Samples its self time is made of, in sampled mode", total("self_samples", count) },
  { "event_cpu_seconds", "histogram", "seconds",
    "CPU time in each event run in (the jank histogram)",
    per_event("durations", "event_us") },
  { "event_self_cpu_seconds", "histogram", "seconds",
    "Self time in each event run in",
    per_event("self_durations", "self_event_us") },
}

local function write_family(out, family, name, series)
  local _, mtype, unit, help, write = table.unpack(family)
  out[#out + 1] = ("# TYPE %s %s\n"):format(name, mtype)
  if unit then out[#out + 1] = ("# UNIT %s %s\n"):format(name, unit) end
  out[#out + 1] = ("# HELP %s %s\n"):format(name, help)
  for _, s in ipairs(series) do write(out, name, s[1], s[2]) end
end

--- The snapshot snap as an OpenMetrics text exposition (ending "# EOF\n"):
-- per group, with labels name, kind, id and opts.labels, the families
-- <prefix>cpu_seconds and self_cpu_seconds (counters, mode = user |
-- system), blocking_seconds, alloc_bytes, self_alloc_bytes, allocs,
-- self_allocs, ticks, events, stack_samples, self_stack_samples (counters),
-- event_cpu_seconds
-- and event_self_cpu_seconds (histograms); the same for the process as
-- <prefix>process_*.  opts.prefix: "perfmon_" by default.
function openmetrics.encode(snap, opts)
  check_snapshot(snap)
  local prefix, extra = check_options(opts)
  local ids = {}
  for id in pairs(snap.groups) do ids[#ids + 1] = id end
  table.sort(ids)
  local groups = {}
  for i, id in ipairs(ids) do
    local st = snap.groups[id]
    groups[i] = { ('name="%s",kind="%s",id="%d"%s'):format(
      label_value(st.name), label_value(st.kind), st.id, extra), st }
  end
  local process = { { extra:sub(2), snap.process } } -- without the ','

  local out = {}
  for _, f in ipairs(FAMILIES) do
    write_family(out, f, prefix .. f[1], groups)
  end
  for _, f in ipairs(FAMILIES) do
    write_family(out, f, prefix .. "process_" .. f[1], process)
  end
  out[#out + 1] = "# EOF\n"
  return table.concat(out)
end

return module(openmetrics)
