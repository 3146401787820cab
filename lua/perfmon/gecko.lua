--- perfmon.gecko: a profile in the Gecko profile format.
--
-- The Firefox Profiler's back end writes this JSON; profiler.firefox.com
-- opens it (Load a profile from file) and upgrades it to its own format.
-- One thread per lua_State sampled (the main thread and each coroutine),
-- each with its samples, its stackTable (prefix, frame), frameTable and
-- stringTable; a frame or a stack seen many times is written once, and a
-- string once per thread.  Each frame's category is its performance group.
-- Jank alerts seen while a monitor was open are interval markers.
--
-- Written against docs-developer/gecko-profile-format.md and the
-- front end's src/types/gecko-profile.js of firefox-devtools/profiler,
-- format version 27 (the frameTable without `optimizations`).

local gecko = {}

gecko.VERSION = 27

local module = require("perfmon.module")
local args = require("perfmon.args")
local text = require("perfmon.text")
local array, null = text.array, text.null

--- The JSON text of a profile (perfmon.text's JSON, valid UTF-8).
function gecko.encode(t)
  if type(t) ~= "table" then
    args.error(1, "perfmon.gecko.encode", "Gecko profile (a table) expected, got " .. type(t))
  end
  local json = args.pass_on(1, "perfmon.gecko.encode", t, text.json, "perfmon.text.json")
  return json
end

----------------------------------------------------------------------------
-- Labels and categories
----------------------------------------------------------------------------

--- How a function is shown: "name (file:line:0)" for Lua functions, the
-- form the front end reads as a JavaScript-like function with a file and
-- a line; "name" for C functions.
function gecko.label(f)
  if type(f) ~= "table" then
    args.error(1, "perfmon.gecko.label", "function record expected, got " .. type(f))
  end
  if f.what == "C" then
    return f.name or "?"
  end
  local name = f.name or (f.what == "main" and "main chunk") or "function"
  return ("%s (%s:%d:0)"):format(name, f.file, f.line)
end

local COLORS = { "yellow", "orange", "blue", "green", "purple", "red",
                 "lightblue", "brown", "magenta", "grey" }

-- categories: index 0 "Lua" for code of no group; one per group after it.
local function categories()
  local list = array{ { name = "Lua", color = "grey", subcategories = array{ "Other" } } }
  local index = {}
  local function of(id, name)
    if id == nil then return 0 end
    if not index[id] then
      list[#list + 1] = { name = name, color = COLORS[(#list - 1) % #COLORS + 1],
                          subcategories = array{ "Other" } }
      index[id] = #list - 1
    end
    return index[id]
  end
  return list, of
end

----------------------------------------------------------------------------
-- The profile
----------------------------------------------------------------------------

local MARKER_SCHEMA = array{
  {
    name = "PerfmonAlert",
    display = array{ "marker-chart", "marker-table", "timeline-overview" },
    chartLabel = "{marker.data.group}",
    tooltipLabel = "{marker.data.reason} in {marker.data.group}",
    tableLabel = "{marker.data.reason} in {marker.data.group}",
    data = array{
      { key = "group", label = "Group", format = "string", searchable = true },
      { key = "reason", label = "Reason", format = "string" },
      { key = "highest_self", label = "Highest self time", format = "milliseconds" },
      { key = "highest_jank", label = "Highest jank (inclusive)", format = "milliseconds" },
      { key = "highest_blocking", label = "Highest blocking", format = "milliseconds" },
      { key = "visible", label = "Visible", format = "string" },
    },
  },
}

-- One thread's tables, filled as its samples are added.
local function new_thread(number, name, pid)
  local th = {
    strings = array(), string_index = {},
    frames = array(), frame_index = {},
    stacks = array(), stack_of = {}, -- [node] = stack index
    samples = array(), markers = array(),
    last_ms = -math.huge, -- the time of its newest sample row
  }
  th.json = {
    name = name, processType = "default", processName = "perfmon",
    pid = pid, tid = number, registerTime = 0, unregisterTime = null,
    samples = { schema = { stack = 0, time = 1, eventDelay = 2 }, data = th.samples },
    markers = { schema = { name = 0, startTime = 1, endTime = 2, phase = 3, category = 4, data = 5 },
                data = th.markers },
    stackTable = { schema = { prefix = 0, frame = 1 }, data = th.stacks },
    frameTable = {
      schema = { location = 0, relevantForJS = 1, innerWindowID = 2, implementation = 3,
                 line = 4, column = 5, category = 6, subcategory = 7 },
      data = th.frames,
    },
    stringTable = th.strings,
  }
  return th
end

local function string_of(th, s)
  local i = th.string_index[s]
  if not i then
    th.strings[#th.strings + 1] = s
    i = #th.strings - 1
    th.string_index[s] = i
  end
  return i
end

--- The Gecko profile (a Lua table for gecko.encode) of d, the records of
-- core.profiler_dump plus d.markers (perfmon.profiler's jank markers).
function gecko.profile(d)
  if type(d) ~= "table" or type(d.funcs) ~= "table" or type(d.nodes) ~= "table"
    or type(d.samples) ~= "table" then
    args.error(1, "perfmon.gecko.profile", "profiler records (core.profiler_dump's) expected, got "
      .. (type(d) == "table" and "a table without funcs, nodes and samples" or type(d)))
  end
  local funcs, nodes = d.funcs, d.nodes
  local cats, category_of = categories()
  -- whole ms: JSON numbers keep 14 digits (perfmon.text), and times since
  -- the epoch have 13 before the point; every other time is relative to it
  local start_ms = d.start_time_us // 1000
  local interval_ms = d.interval_us / 1000
  local pid = d.pid
  local threads, order = {}, {}

  local function thread(number)
    local th = threads[number]
    if not th then
      th = new_thread(number, number == 1 and "Lua main thread" or ("coroutine " .. (number - 1)), pid)
      threads[number] = th
      order[#order + 1] = number
    end
    return th
  end

  local function frame_of(th, node)
    local f = funcs[nodes.func[node]]
    local line = nodes.line[node]
    local key = nodes.func[node] .. ":" .. line
    local i = th.frame_index[key]
    if not i then
      th.frames[#th.frames + 1] = array{
        string_of(th, gecko.label(f)), false, 0, null,
        line >= 0 and line or null, null,
        category_of(f.group_id, f.group), 0,
      }
      i = #th.frames - 1
      th.frame_index[key] = i
    end
    return i
  end

  local function stack_of(th, node)
    local i = th.stack_of[node]
    if not i then
      local parent = nodes.parent[node]
      local prefix = parent ~= 0 and stack_of(th, parent) or null
      th.stacks[#th.stacks + 1] = array{ prefix, frame_of(th, node) }
      i = #th.stacks - 1
      th.stack_of[node] = i
    end
    return i
  end

  local s = d.samples
  for i = 1, #s.node do
    local th = thread(s.thread[i])
    local stack = stack_of(th, s.node[i])
    local t = (s.time[i] / 1000) - start_ms
    -- a sample of weight w stands for w periods (a "tick" timer's samples
    -- weigh several as a rule): one row each, going back from the sample,
    -- as the front end counts rows; never back past the thread's previous
    -- row, since a thread's samples are in time order.  The periods were
    -- CPU time since the last count, which may come a few µs before the
    -- previous sample.
    local last = th.last_ms
    for k = s.weight[i] - 1, 0, -1 do
      local row = t - k * interval_ms
      th.samples[#th.samples + 1] = array{ stack, row > last and row or last, 0 }
    end
    th.last_ms = t > last and t or last
  end
  local main = thread(1)
  for _, m in ipairs(d.markers or {}) do
    main.markers[#main.markers + 1] = array{
      string_of(main, m.name), m.start_us / 1000 - start_ms, m.end_us / 1000 - start_ms,
      1, category_of(m.group_id, m.group),
      { type = "PerfmonAlert", group = m.group, reason = m.reason,
        highest_self = (m.highest_self_us or 0) / 1000,
        highest_jank = (m.highest_jank_us or 0) / 1000,
        highest_blocking = (m.highest_blocking_us or 0) / 1000,
        visible = tostring(m.visible) },
    }
  end

  table.sort(order)
  local list = array()
  for _, number in ipairs(order) do list[#list + 1] = threads[number].json end
  return {
    meta = {
      version = gecko.VERSION, interval = interval_ms, startTime = start_ms,
      shutdownTime = null, processType = 0, product = "perfmon (" .. _VERSION .. ")",
      stackwalk = 0, debug = 0, gcpoison = 0, asyncstack = 0,
      platform = "", oscpu = "", misc = "", abi = "", toolkit = "",
      categories = cats, markerSchema = MARKER_SCHEMA,
    },
    libs = array(), pausedRanges = array(), processes = array(),
    threads = list,
  }
end

return module(gecko)
