--- perfmon: which plugin, page or sandbox is making this Lua host slow.
--
-- The C core (perfmon.core) runs the hook and the stopwatches; this module
-- is the API: groups, monitors with probes, snapshots and their arithmetic,
-- event markers and JSON.

local core = require("perfmon.loader") -- perfmon.core, in any host
local module = require("perfmon.module")

local perfmon = {}

--- A group's figures, as the core lists them: { name, unit ("us",
-- "bytes", "count"), kind ("counter", or "histogram" with its number of
-- buckets) } each, in the order stats hold them.  Every module that reads
-- stats reads this list.
perfmon.figures = core.figures
-- its counters and its histograms, by name
local STAT_FIELDS, HISTOGRAMS, BUCKETS = {}, {}, nil
for _, f in ipairs(core.figures) do
  if f.kind == "histogram" then
    HISTOGRAMS[#HISTOGRAMS + 1], BUCKETS = f.name, f.buckets
  else
    STAT_FIELDS[#STAT_FIELDS + 1] = f.name
  end
end
-- Fields a snapshot written before they existed lacks: they read as 0.
local LATER_FIELDS = { samples = true, self_samples = true }

local args = require("perfmon.args")
local arg_error = args.error
local text = require("perfmon.text")

local check_self = args.check_self

-- Which Lua state a snapshot is of (its `state`), so that two states'
-- snapshots never pair by id: ids start at 1 in every state, and two
-- processes that made the same groups in one order hold the same ids,
-- kinds and names.  Made once a state, and kept in its registry so that
-- perfmon loaded again there keeps it: the time (in s, and in µs on
-- core.wall_us's clock) and the address of a table of the state, which no
-- state alive beside it shares.
local STATE
do
  local debug = package.loaded.debug
  local reg = debug and debug.getregistry and debug.getregistry()
  STATE = reg and reg["perfmon.snapshot_state"]
  if type(STATE) ~= "string" then
    local t = tostring({})
    STATE = ("%d-%.0f-%s"):format(os.time(), core.wall_us(), t:match("0x%x+") or t)
    if reg then reg["perfmon.snapshot_state"] = STATE end
  end
end

----------------------------------------------------------------------------
-- Groups and environments
----------------------------------------------------------------------------

perfmon.group = core.group
perfmon.attach = core.attach
perfmon.attach_source = core.attach_source
perfmon.detach_source = core.detach_source
perfmon.detach = core.detach

local function check_env(fname, n, env, group)
  if type(env) ~= "table" then
    arg_error(n, fname, "table expected, got " .. type(env), 2)
  end
  if group ~= nil and not core.is_group(group) then
    arg_error(n + 1, fname, "perfmon.group expected, got " .. type(group), 2)
  end
end

local function register(fn, env, group)
  if group ~= nil then core.attach(env, group) end
  core.chunk(fn)
  return fn
end

--- Loads a text chunk with env as its environment, attached to group.
-- Returns the function, or nil and the message, as load does.
function perfmon.load(src, chunkname, env, group)
  if type(src) ~= "string" and type(src) ~= "function" then
    arg_error(1, "perfmon.load", "string or function expected, got " .. type(src))
  end
  if chunkname ~= nil and type(chunkname) ~= "string" then
    arg_error(2, "perfmon.load", "string expected, got " .. type(chunkname))
  end
  -- it names the chunk's group, which the C core would cut at a NUL
  if chunkname and chunkname:find("\0", 1, true) then
    arg_error(2, "perfmon.load", "chunk name contains a NUL byte")
  end
  check_env("perfmon.load", 3, env, group)
  local fn, err = load(src, chunkname, "t", env)
  if not fn then return nil, err end
  return register(fn, env, group)
end

--- Loads a text file with env as its environment, attached to group.
function perfmon.loadfile(path, env, group)
  if type(path) ~= "string" then
    arg_error(1, "perfmon.loadfile", "string expected, got " .. type(path))
  end
  -- loadfile would open the file named by the bytes before it
  if path:find("\0", 1, true) then
    arg_error(1, "perfmon.loadfile", "path contains a NUL byte")
  end
  check_env("perfmon.loadfile", 2, env, group)
  local fn, err = loadfile(path, "t", env)
  if not fn then return nil, err end
  return register(fn, env, group)
end

----------------------------------------------------------------------------
-- Events, nested loops, blocking calls
----------------------------------------------------------------------------

perfmon.event_begin = core.event_begin
perfmon.event_end = core.event_end

--- Runs fn(...) as one iteration of the event loop; returns its results.
-- The end of the event is a to-be-closed value: it comes however fn ends
-- (a return, an error, coroutine.close of a coroutine suspended inside).
-- Written in C, as a host calls it for every event.
perfmon.event = core.event

--- Runs fn(...) as a nested event loop: the measures of the iteration that
-- spins it are cancelled, so it is not charged for what runs inside.
perfmon.nested_loop = core.nested_loop

--- Runs fn(...) as a blocking call: its wall time is charged as
-- blocking_us to the groups running around it.
perfmon.blocking = core.blocking

--- The host saw user input (a keystroke, a click): jank in the events
-- that follow within the watcher's input window is visible.
perfmon.user_input = core.user_input

--- The host starts (true) or stops (false) an animation: jank in an event
-- during which an animation ran is visible.
perfmon.animation = core.animation

----------------------------------------------------------------------------
-- Snapshots
----------------------------------------------------------------------------

local Snapshot = {}
Snapshot.__index = Snapshot

local longest = require("perfmon.buckets").longest

local function stats_minus(new, old)
  local d = {
    id = new.id, name = new.name, kind = new.kind, library = new.library,
    memberships = table.move(new.memberships, 1, #new.memberships, 1, {}),
  }
  for _, f in ipairs(STAT_FIELDS) do
    d[f] = new[f] - (old and old[f] or 0)
  end
  for _, h in ipairs(HISTOGRAMS) do
    d[h] = {}
    for k = 1, #new[h] do
      d[h][k] = new[h][k] - (old and old[h][k] or 0)
    end
  end
  d.longest = longest(d.durations)
  return d
end

-- A group's identity across states: its kind and name as perfmon.json
-- writes them (valid UTF-8: a snapshot read back pairs with the one that
-- was written), in a key no two (kind, name) pairs share, whatever bytes
-- they hold.
local function group_key(st)
  local kind = text.utf8(st.kind)
  return #kind .. ":" .. kind .. text.utf8(st.name)
end

-- Whether two groups of one id are one group: the same kind and name, as
-- written.
local function same_group(a, b)
  return (a.kind == b.kind and a.name == b.name) or group_key(a) == group_key(b)
end

--- What happened between older and self: same shape; a group new since
-- older counts from zero; time is the elapsed wall time in µs.  Groups
-- pair by id within a state, by kind and name where either snapshot is
-- merged (the other is merged first, as perfmon.merge{ s } would).
function Snapshot:subtract(older)
  check_self(self, Snapshot, "snapshot:subtract", "snapshot")
  if getmetatable(older) ~= Snapshot then
    arg_error(1, "snapshot:subtract", "snapshot expected, got " .. type(older))
  end
  local new, groups = self, {}
  if self.merged or older.merged then
    if not new.merged then new = perfmon.merge{ new } end
    if not older.merged then older = perfmon.merge{ older } end
    local by_key = {}
    for _, st in pairs(older.groups) do by_key[group_key(st)] = st end
    for id, st in pairs(new.groups) do groups[id] = stats_minus(st, by_key[group_key(st)]) end
  else
    if new.state and older.state and new.state ~= older.state then
      arg_error(1, "snapshot:subtract", ("the snapshots are of two states: %s here, %s there; snapshots "
        .. "of two states pair by kind and name once merged (perfmon.merge)"):format(new.state, older.state))
    end
    for id, st in pairs(new.groups) do
      local old = older.groups[id]
      -- ids are never reused within a state: another group under this id
      -- is another state's
      if old and not same_group(old, st) then
        arg_error(1, "snapshot:subtract", ("group %d is %s %q here but %s %q there: snapshots "
          .. "of two states pair by kind and name once merged (perfmon.merge)"):format(
          id, st.kind, st.name, old.kind, old.name))
      end
      groups[id] = stats_minus(st, old)
    end
  end
  return setmetatable({
    time = new.time - older.time,
    process = stats_minus(new.process, older.process),
    groups = groups,
    hook_lost = new.hook_lost, -- perfmon lost its hook before self
    merged = new.merged,
    state = not new.merged and new.state or nil,
  }, Snapshot)
end

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do
    if not same(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

--- Whether two snapshots hold the same time and statistics.
function Snapshot:equals(other)
  check_self(self, Snapshot, "snapshot:equals", "snapshot")
  return getmetatable(other) == Snapshot and same(self, other)
end

----------------------------------------------------------------------------
-- Monitors
----------------------------------------------------------------------------

local Monitor = {}
Monitor.__index = Monitor

-- Lua has one debug hook per thread, and perfmon's monitors need it.  The
-- hook is shared: while an exact monitor is open, debug.sethook and
-- debug.gethook are perfmon's (core.hook_functions: the core swaps them in
-- and out as exact monitors open and close), and a program's hook
-- (a debugger's, a coverage tool's, one set before the monitor opened) is
-- called from perfmon's for the events it asked for; debug.gethook returns
-- it, never perfmon's own, so that debug.sethook(co, debug.gethook()), as
-- Prosody's util.async does for every runner, copies the program's hook.
-- When the last monitor closes, the program's hooks are set back as it set
-- them.  A hook set behind perfmon's back (a debug.sethook kept from
-- before, or C code) is noticed at the next snapshot or event boundary and
-- reported (snapshot.hook_lost).
-- debug.setupvalue and debug.upvaluejoin are perfmon's from here on
-- (core.upvalue_functions): they behave as the library's and also forget
-- the cached groups of the functions whose _ENV they change, which are
-- resolved again at their next call.
if package.loaded.debug then
  core.hook_functions(package.loaded.debug)
  core.upvalue_functions(package.loaded.debug)
end

--- Opens a monitor holding the named probes: "jank" (CPU times and the
-- durations histogram), "blocking", "ticks", "chunks" (a group per chunk).
-- probes.mode: "exact" (the default: the call/return hook measures every
-- group) or "sampled" (no hook: groups are charged from samples of the
-- stack every probes.rate_us µs of the thread's CPU time, 4000 unless
-- given; events stay exact).  probes.window_ms (sampled): the monitor's
-- rate counts only for that many ms of wall time, its sample window, whose
-- figures monitor:window() reads (one such monitor at a time).
function perfmon.monitor(probes)
  -- made (with its finalizer) before the probes are taken, so that a
  -- memory error cannot leave them held by no monitor; setting fields the
  -- table has allocates nothing
  local mon = setmetatable({ mask = 0, closed = true, mode = "exact" }, Monitor)
  -- the core checks the names; its error is raised again at the caller's line
  local ok, mask, rate_us, window_ms = pcall(core.open, probes)
  if not ok then error(mask, 2) end
  mon.mask, mon.closed = mask, false
  mon.mode = rate_us and "sampled" or "exact"
  mon.rate_us = rate_us or nil
  mon.window_ms = window_ms
  return mon
end

--- Releases the monitor's probes; closing twice does nothing.
function Monitor:close()
  check_self(self, Monitor, "monitor:close", "monitor")
  if not self.closed then
    self.closed = true
    core.close(self.mask, self.rate_us or false, self.window_ms ~= nil)
  end
end

Monitor.__close = Monitor.close
Monitor.__gc = Monitor.close

-- The core's totals as a snapshot; `longest`, the bucket of its longest
-- event, is buckets.longest's, as for every snapshot arithmetic makes.
local function snapshot_of(stats)
  stats.process.longest = longest(stats.process.durations)
  for _, st in pairs(stats.groups) do st.longest = longest(st.durations) end
  stats.state = STATE
  return setmetatable(stats, Snapshot)
end

--- Totals since monitoring began, up to now (an open event is committed
-- when it ends).
function Monitor:snapshot()
  check_self(self, Monitor, "monitor:snapshot", "monitor")
  if self.closed then error("monitor:snapshot: the monitor is closed", 2) end
  return snapshot_of(core.stats())
end

--- A windowed monitor's figures in its sample window (docs/api.md): each
-- sample's CPU time by the part of its span inside the window, whenever
-- read, even inside an event that outlasts it, up to its last sample.
-- { since_us, until_us, last_us (core.wall_us's clock), open, cpu_us,
-- missed_us, samples, groups =
-- { [id] = { cpu_us, self_us, samples, self_samples } } }.
function Monitor:window()
  check_self(self, Monitor, "monitor:window", "monitor")
  if self.closed then error("monitor:window: the monitor is closed", 2) end
  if not self.window_ms then
    error("monitor:window: the monitor has no window_ms", 2)
  end
  return core.window()
end

--- The totals now, as a monitor's snapshot gives them (every monitor of
-- the state sees the same totals): they move only while a monitor holds
-- the probes.
function perfmon.snapshot()
  return snapshot_of(core.stats())
end

----------------------------------------------------------------------------
-- JSON
----------------------------------------------------------------------------

-- A snapshot read back from JSON: every field checked, as it may come from
-- another process, another version, or a file someone edited.  The checks
-- raise the bare message; snapshot_from_json says whose argument it was.
-- A field is named as where.key[i], built only for a message.
local function json_error(where, key, msg, i)
  error(("%s%s%s %s"):format(where, key and ("." .. key) or "", i and ("[%d]"):format(i) or "", msg), 0)
end

-- Integers come back exactly (text.decode); a float is taken where it is
-- a whole number that a double holds exactly (1e3: 1000).
local function json_int(v, where, key, i)
  if math.type(v) == "integer" then return v end
  local n = math.type(v) == "float" and v == v // 1 and math.abs(v) <= 2 ^ 53 and math.tointeger(v)
  if not n then
    json_error(where, key, ("must be a whole number, got %s"):format(
      math.type(v) and tostring(v) or v == text.null and "null" or type(v)), i)
  end
  return n
end

-- Names and kinds are C strings in every perfmon: one with a NUL byte was
-- not written by perfmon, and would merge with another.
local function json_string(v, where, key)
  if type(v) ~= "string" then
    json_error(where, key, "must be a string, got " .. (v == text.null and "null" or type(v)))
  end
  if v:find("\0", 1, true) then json_error(where, key, "contains a NUL byte") end
  return v
end

-- A flag written only when set (a library group's, a merged snapshot's).
local function json_true(v, where, key)
  if v ~= nil and v ~= true then json_error(where, key, "must be true or absent, got " .. tostring(v)) end
  return v
end

-- A snapshot's state: absent where a perfmon that did not write it wrote
-- the snapshot (which then pairs by id, as it did there).
local function json_state(v)
  if v ~= nil and type(v) ~= "string" then
    json_error("state", nil, "must be a string or absent, got " .. (v == text.null and "null" or type(v)))
  end
  return v
end

local function json_list(v, where, key, len)
  if type(v) ~= "table" or v == text.null or (len and #v ~= len) then
    json_error(where, key, "must be a list" .. (len and (" of %d numbers"):format(len) or ""))
  end
  local out = {}
  for i = 1, #v do out[i] = json_int(v[i], where, key, i) end
  return out
end

local function stats_from_json(st, where)
  if type(st) ~= "table" or st == text.null then
    json_error(where, nil, "must be an object, got " .. (st == text.null and "null" or type(st)))
  end
  local out = {
    id = json_int(st.id, where, "id"),
    name = json_string(st.name, where, "name"),
    kind = json_string(st.kind, where, "kind"),
    library = json_true(st.library, where, "library"),
    memberships = json_list(st.memberships, where, "memberships"),
  }
  for _, f in ipairs(STAT_FIELDS) do
    out[f] = (st[f] == nil and LATER_FIELDS[f]) and 0 or json_int(st[f], where, f)
  end
  for _, h in ipairs(HISTOGRAMS) do out[h] = json_list(st[h], where, h, BUCKETS) end
  out.longest = longest(out.durations)
  return out
end

-- A group's stats as JSON values, as snapshot_from_json checks and reads
-- them (memberships a list even when empty): a value it would refuse or
-- read back as another number (a snapshot edited by hand: 1.5, a float
-- past 2^53, which JSON's 14 digits round) is refused here, and a whole
-- float written as the integer it is.  A name or kind with a NUL byte
-- (perfmon makes none) is named as given.
local function json_stats(st, where)
  for _, f in ipairs{ "kind", "name" } do
    if type(st[f]) == "string" and st[f]:find("\0", 1, true) then
      arg_error(1, "perfmon.json", ("group %s's %s contains a NUL byte: %q"):format(
        tostring(st.id), f, st[f]), 2)
    end
  end
  local ok, j = pcall(stats_from_json, st, where)
  if not ok then arg_error(1, "perfmon.json", j, 2) end
  j.memberships = text.array(j.memberships)
  for _, h in ipairs(HISTOGRAMS) do j[h] = text.array(j[h]) end
  return j
end

--- The snapshot as JSON (perfmon.text's); groups are keyed by their id.
-- Every value comes back exactly from snapshot_from_json: integers are
-- written with every digit.
function perfmon.json(snap)
  if getmetatable(snap) ~= Snapshot then
    arg_error(1, "perfmon.json", "snapshot expected, got " .. type(snap))
  end
  local groups = {}
  for id, st in pairs(snap.groups) do
    local where = ("groups[%s]"):format(tostring(id))
    local j = json_stats(st, where)
    if j.id ~= id then arg_error(1, "perfmon.json", ("%s has id %s"):format(where, tostring(j.id))) end
    groups[tostring(id)] = j
  end
  local ok, time = pcall(json_int, snap.time, "time")
  if not ok then arg_error(1, "perfmon.json", time) end
  local state
  ok, state = pcall(json_state, snap.state)
  if not ok then arg_error(1, "perfmon.json", state) end
  return text.json{
    time = time, process = json_stats(snap.process, "process"), groups = groups,
    hook_lost = snap.hook_lost, merged = snap.merged, state = state,
  }
end

--- The snapshot that perfmon.json wrote: loaded back, it subtracts, merges
-- and exports as the original did, every figure exact (integers past 2^53
-- included: perfmon.text.decode, not lua-cjson's doubles).
function perfmon.snapshot_from_json(s)
  if type(s) ~= "string" then arg_error(1, "perfmon.snapshot_from_json", "string expected, got " .. type(s)) end
  local ok, t = pcall(text.decode, s)
  if not ok then arg_error(1, "perfmon.snapshot_from_json", "not JSON: " .. tostring(t)) end
  local snap
  ok, snap = pcall(function()
    if type(t) ~= "table" or type(t.groups) ~= "table" or t.groups == text.null or t.groups[1] ~= nil then
      error("not a snapshot: no 'groups' object", 0)
    end
    local out = setmetatable({
      time = json_int(t.time, "time"),
      process = stats_from_json(t.process, "process"),
      groups = {},
      hook_lost = json_true(t.hook_lost, "hook_lost"),
      merged = json_true(t.merged, "merged"),
      state = json_state(t.state),
    }, Snapshot)
    for key, st in pairs(t.groups) do
      local where = ("groups[%q]"):format(key)
      local g = stats_from_json(st, where)
      if tostring(g.id) ~= key then json_error(where, nil, ("has id %d"):format(g.id)) end
      out.groups[g.id] = g
    end
    return out
  end)
  if not ok then arg_error(1, "perfmon.snapshot_from_json", tostring(snap)) end
  return snap
end

-- Adds the figures of b to a (stats of one group, or of the process).
local function stats_add(a, b)
  for _, f in ipairs(STAT_FIELDS) do a[f] = a[f] + b[f] end
  for _, h in ipairs(HISTOGRAMS) do
    for k = 1, #b[h] do a[h][k] = (a[h][k] or 0) + b[h][k] end
  end
  a.longest = longest(a.durations)
end

-- A copy of st's figures under id, with no memberships yet.
local function stats_copy(st, id)
  local c = stats_minus(st, nil)
  c.id, c.memberships = id, {}
  return c
end

--- One snapshot of several (of several Lua states or processes, as
-- snapshot_from_json reads them back): groups of one kind and name are one
-- group, their figures summed, numbered in order of kind and name; the
-- process sums the processes; time is the latest.  Merged snapshots
-- subtract by kind and name.
function perfmon.merge(snaps)
  if type(snaps) ~= "table" then arg_error(1, "perfmon.merge", "list of snapshots expected, got " .. type(snaps)) end
  for i, s in ipairs(snaps) do
    if getmetatable(s) ~= Snapshot then
      arg_error(1, "perfmon.merge", ("snapshot expected at index %d, got %s"):format(i, type(s)))
    end
  end
  if #snaps == 0 then arg_error(1, "perfmon.merge", "no snapshot to merge") end
  local keys, by_key = {}, {}
  for _, s in ipairs(snaps) do
    for _, st in pairs(s.groups) do
      local key = group_key(st)
      if not by_key[key] then keys[#keys + 1], by_key[key] = key, {} end
      table.insert(by_key[key], { snap = s, st = st })
    end
  end
  table.sort(keys, function(a, b)
    a, b = by_key[a][1].st, by_key[b][1].st
    if a.kind ~= b.kind then return a.kind < b.kind end
    return a.name < b.name
  end)
  local id_of, merged = {}, setmetatable({ time = 0, groups = {}, merged = true }, Snapshot)
  for id, key in ipairs(keys) do
    id_of[key] = id
    for i, e in ipairs(by_key[key]) do
      if i == 1 then merged.groups[id] = stats_copy(e.st, id) else stats_add(merged.groups[id], e.st) end
    end
  end
  -- memberships: the groups a group is inside, by kind and name
  for id, key in ipairs(keys) do
    local seen, list = {}, merged.groups[id].memberships
    for _, e in ipairs(by_key[key]) do
      for _, m in ipairs(e.st.memberships) do
        local g = m ~= 0 and e.snap.groups[m]
        local mid = m == 0 and 0 or g and id_of[group_key(g)]
        if mid and not seen[mid] then seen[mid] = true; list[#list + 1] = mid end
      end
    end
    table.sort(list)
  end
  for i, s in ipairs(snaps) do
    if i == 1 then merged.process = stats_copy(s.process, 0) else stats_add(merged.process, s.process) end
    merged.time = math.max(merged.time, s.time)
    merged.hook_lost = merged.hook_lost or s.hook_lost
  end
  return merged
end

--- The snapshot as an OpenMetrics text exposition (perfmon.openmetrics,
-- docs/openmetrics.md); opts: { prefix = "perfmon_", labels = {...} }.
function perfmon.openmetrics(snap, opts)
  if getmetatable(snap) ~= Snapshot then
    arg_error(1, "perfmon.openmetrics", "snapshot expected, got " .. type(snap))
  end
  -- a tail call, so that encode's argument errors name the user's line
  return require("perfmon.openmetrics").encode(snap, opts)
end

perfmon.info = core.info

return module(perfmon)
