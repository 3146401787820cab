--- perfmon.where: where a group's self time went, read from a profiler's
-- samples, for warnings that say more than the plugin's name.
--
-- A sample's time belongs to one group, as the stopwatch charges self
-- time: the innermost frame whose function has a group that is not a
-- library.  Frames of no group (a host's helpers) and C functions are
-- transparent, and a library group's frames (a host's core API,
-- `perfmon.group{library = true}`) are its caller's time; a library with
-- no other group below it is the owner itself.  Of the owner's samples,
-- this module finds the place that holds most of them: the owner's
-- innermost frame (its "own" frame) and, when something runs above it, the
-- function that frame called (host code on its behalf, at the line of the
-- call), else the own frame's function and its hottest line.
--
-- The samples are those of whichever profiler is given (docs/profiler.md);
-- their figures are periods of the thread's CPU time, so a place's time is
-- its periods times the profiler's interval, an estimate good to about
-- 1/sqrt(n) of itself over n samples.  Below MIN_SAMPLES the module says
-- it has too few to tell, and names nothing.

local core = require("perfmon.loader")
local module = require("perfmon.module")
local arg_error = require("perfmon.args").error

local where = {}

--- The fewest samples of the group in the window for a place to be named:
-- at 10 samples the hottest place's share is good to about a third of
-- itself, enough to point at the right line; fewer would name noise.
where.MIN_SAMPLES = 10

--- The set of library group ids in a snapshot: its groups marked
-- `library = true`.  A snapshot without the mark has none.
function where.libraries(snap)
  if type(snap) ~= "table" or type(snap.groups) ~= "table" then
    arg_error(1, "perfmon.where.libraries", "perfmon snapshot expected, got " .. type(snap))
  end
  local libs = {}
  for id, st in pairs(snap.groups) do
    if type(st) == "table" and st.library == true then libs[id] = true end
  end
  return libs
end

-- The owner of the stack at node k (trie indices, 1-based; 0 is the root):
-- its group id, the node of its own frame, and the node of the frame that
-- one called (nil when the own frame is on top).  The frame called is the
-- nearest Lua frame above the own one, or a C function when only C
-- functions are above it (pcall between a plugin and a helper is not what
-- the plugin is waiting on).
local function owner(d, k, libs)
  local parent, fn, funcs = d.nodes.parent, d.nodes.func, d.funcs
  local called, lib_k, lib_called
  while k ~= 0 do
    local f = funcs[fn[k]]
    local c = f.what == "C"
    if not c and f.group_id then
      if not libs[f.group_id] then return f.group_id, k, called end
      if not lib_k then lib_k, lib_called = k, called end
    end
    if not c or called == nil then called = k end
    k = parent[k]
  end
  if lib_k then return funcs[fn[lib_k]].group_id, lib_k, lib_called end
end

local function func_key(f)
  return f.what == "C" and ("C:" .. (f.name or "?")) or (f.file .. ":" .. f.line)
end

local function func_copy(f)
  return { name = f.name, file = f.file, line = f.line, what = f.what, group = f.group,
           group_id = f.group_id }
end

-- The place of a sample owned by the group: a key, and how to make it.
local function place(d, own_k, called_k, libs)
  local funcs, fn, line = d.funcs, d.nodes.func, d.nodes.line
  local own = funcs[fn[own_k]]
  if called_k then
    local h = funcs[fn[called_k]]
    local site = own.file .. ":" .. line[own_k]
    return "host " .. func_key(h) .. " " .. site, function()
      return { host = true, func = func_copy(h),
               library = h.group_id ~= nil and libs[h.group_id] == true and h.group or nil,
               site = { file = own.file, line = line[own_k] }, caller = func_copy(own) }
    end
  end
  return "own " .. func_key(own), function()
    return { host = false, func = func_copy(own), lines = {} }
  end
end

local function check_profiler(p, fname)
  if type(p) ~= "table" or p.core == nil or not pcall(core.profiler_state, p.core) then
    arg_error(1, fname, "perfmon.profiler expected, got " .. type(p), 2)
  end
end

local function check_number(v, n, what, fname)
  if type(v) ~= "number" or v ~= v then
    arg_error(n, fname, what .. " expected, got " .. (math.type(v) and tostring(v) or type(v)), 3)
  end
end

-- The window and the libraries, checked (arguments n, n + 1, n + 2).
local function check_window(since_us, until_us, libs, n, fname)
  check_number(since_us, n, "µs since the epoch", fname)
  if until_us == nil then until_us = math.huge end
  check_number(until_us, n + 1, "µs since the epoch", fname)
  if libs ~= nil and type(libs) ~= "table" then
    arg_error(n + 2, fname, "set of library group ids expected, got " .. type(libs), 2)
  end
  return until_us, libs or {}
end

-- A group's result, with its hottest place once its samples are counted.
local function finish(out, made, interval_us)
  out.us = out.periods * interval_us
  if out.samples < where.MIN_SAMPLES then return out end
  local best
  for _, pl in ipairs(made) do -- made in order of first sample: ties go to the first
    if not best or pl.periods > best.periods then best = pl end
  end
  if not best.host then
    local hot, n = nil, -1
    for line, w in pairs(best.lines) do
      if w > n or (w == n and line < hot) then hot, n = line, w end
    end
    best.site = { file = best.func.file, line = hot }
  end
  best.lines = nil
  best.us = best.periods * interval_us
  best.share = best.periods / out.periods
  out.hottest = best
  return out
end

-- The results of the groups in the samples of p between since_us and
-- until_us: { [group id] = result } for the one group gid, or for every
-- group that owns a sample when gid is nil; and the samples in the window.
local function analyse(p, gid, since_us, until_us, libs)
  local d = core.profiler_dump(p.core)
  local s = d.samples
  local results, places, made, memo, window = {}, {}, {}, {}, 0
  for i = 1, #s.node do
    local t = s.time[i]
    if t >= since_us and t <= until_us then
      window = window + 1
      local k = s.node[i]
      local m = memo[k]
      if not m then
        local g, own_k, called_k = owner(d, k, libs)
        m = { gid = g }
        if g and (gid == nil or g == gid) then
          m.key, m.make = place(d, own_k, called_k, libs)
          m.line = d.nodes.line[own_k]
        end
        memo[k] = m
      end
      if m.key then
        local g, w = m.gid, s.weight[i]
        local out = results[g]
        if not out then
          out = { samples = 0, periods = 0, interval_us = d.interval_us, oldest_us = s.time[1] }
          results[g], places[g], made[g] = out, {}, {}
        end
        out.samples, out.periods = out.samples + 1, out.periods + w
        local pl = places[g][m.key]
        if not pl then
          pl = m.make()
          pl.samples, pl.periods = 0, 0
          places[g][m.key] = pl
          made[g][#made[g] + 1] = pl
        end
        pl.samples, pl.periods = pl.samples + 1, pl.periods + w
        if pl.lines then pl.lines[m.line] = (pl.lines[m.line] or 0) + w end
      end
    end
  end
  for g, out in pairs(results) do
    out.window_samples = window
    finish(out, made[g], d.interval_us)
  end
  return results, window, d
end

--- Where group (a group or its id) spent its self time in the profiler's
-- samples taken between since_us and until_us (µs since the epoch, the
-- clock of snapshots and alerts; until_us defaults to now); libs: the set
-- of library group ids (where.libraries).  Returns
-- { samples, periods, us, window_samples, interval_us, oldest_us,
--   hottest = nil | { host, func, library, site, caller, samples,
--   periods, us, share } }: samples and periods are the group's, us their
-- estimated CPU time, window_samples every sample in the window,
-- oldest_us the oldest sample kept (a ring that does not reach back to
-- since_us holds only part of the window).  hottest is nil below
-- MIN_SAMPLES.  For host code, func is the function called, library its
-- library group's name (nil: no group, or C), site the call's file and
-- line in the group's own frame, caller that frame's function; for the
-- group's own code, func is its function and site its hottest line.
function where.find(p, group, since_us, until_us, libs)
  check_profiler(p, "perfmon.where.find")
  local gid = core.is_group(group) and group.id or group
  if math.type(gid) ~= "integer" then
    arg_error(2, "perfmon.where.find", "perfmon.group or group id expected, got " .. type(group))
  end
  until_us, libs = check_window(since_us, until_us, libs, 3, "perfmon.where.find")
  local results, window, d = analyse(p, gid, since_us, until_us, libs)
  return results[gid] or { samples = 0, periods = 0, us = 0, window_samples = window,
    interval_us = d.interval_us, oldest_us = d.samples.time[1] }
end

--- where.find for every group at once, reading the samples once:
-- { [group id] = its result } for each group that owns a sample in the
-- window (a group that owns none is not there).
function where.find_all(p, since_us, until_us, libs)
  check_profiler(p, "perfmon.where.find_all")
  until_us, libs = check_window(since_us, until_us, libs, 2, "perfmon.where.find_all")
  return (analyse(p, nil, since_us, until_us, libs))
end

local function duration(us)
  return us >= 1e6 and ("%.1f s"):format(us / 1e6) or ("%.0f ms"):format(us / 1000)
end

-- The function called, as the warning names it: a library's by the
-- library's name, one of no group as the host's, a C function as one, one
-- with no name by where it is defined.  brief: a named one without that.
local function host_name(h, brief)
  local f = h.func
  if f.what == "C" then return "C function " .. (f.name or "?") end
  if not f.name then
    return ("%s at %s:%d"):format(h.library and (h.library .. "'s function") or "a host function",
      f.file, f.line)
  end
  local whose = h.library and (h.library .. "'s ") or "host function "
  if brief then return whose .. f.name end
  return ("%s%s (%s:%d)"):format(whose, f.name, f.file, f.line)
end

--- A found place (where.find's result) as text for a warning:
-- "2.7 s in core's fuzzy_match (core/common.lua:120), called from
-- symbolhint/init.lua:42 (85% of 120 samples)" ("host function
-- fuzzy_match" for one of no group, "C function rep" for C), "1.1 s in its own
-- check_word at spell/init.lua:17 (92% of 40 samples)", or, with too few
-- samples, "too few profiler samples to say where (3 in the window, 10
-- needed)".
function where.text(found)
  if type(found) ~= "table" or type(found.samples) ~= "number" then
    arg_error(1, "perfmon.where.text", "where.find's result expected, got " .. type(found))
  end
  local h = found.hottest
  if not h then
    return ("too few profiler samples to say where (%d in the window, %d needed)")
      :format(found.samples, where.MIN_SAMPLES)
  end
  local share = (" (%.0f%% of %d samples)"):format(100 * h.share, found.samples)
  if not h.host then
    local f = h.func
    return ("%s in its own %s at %s:%d"):format(duration(h.us),
      f.name or "function", h.site.file, h.site.line) .. share
  end
  return ("%s in %s, called from %s:%d"):format(duration(h.us), host_name(h),
    h.site.file, h.site.line) .. share
end

--- The same, short, for a column of a table: "core's fuzzy_match, from
-- symbolhint/init.lua:42 (85%)", "check_word at spell/init.lua:17 (92%)",
-- or "too few samples (3)".
function where.brief(found)
  if type(found) ~= "table" or type(found.samples) ~= "number" then
    arg_error(1, "perfmon.where.brief", "where.find's result expected, got " .. type(found))
  end
  local h = found.hottest
  if not h then return ("too few samples (%d)"):format(found.samples) end
  local share = (" (%.0f%%)"):format(100 * h.share)
  local f = h.func
  if not h.host then
    return ("%s at %s:%d"):format(f.name or "function", h.site.file, h.site.line) .. share
  end
  return ("%s, from %s:%d"):format(host_name(h, true), h.site.file, h.site.line) .. share
end

return module(where)
