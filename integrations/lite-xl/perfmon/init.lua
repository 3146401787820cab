-- mod-version:3 --priority:10000
-- perfmon in Lite XL: which plugin makes the editor slow (perfmon, after
-- Firefox's about:performance).  integrations/lite-xl/README.md says how
-- to install it.  Loaded last (priority 10000), so that its wrap of
-- core.step is the outermost one: the code of every plugin that wraps
-- core.step too runs inside the event.

local core = require "core"
local command = require "core.command"
local common = require "core.common"
local config = require "core.config"
local StatusView = require "core.statusview"
local style = require "core.style"

---------------------------------------------------------------------------
-- Loading perfmon; failures that stay
---------------------------------------------------------------------------

-- This plugin's folder, where `cmake --install build --component lite-xl
-- --prefix USERDIR` puts perfmon's Lua modules (lua/) and its native
-- build for Lite XL (perfmon.so).
local HERE = debug.getinfo(1, "S").source:sub(2):match("^(.*)[/\\]")
local INSTALL = ("run cmake --install build --component lite-xl --prefix %s")
  :format(common.home_encode(USERDIR))
local HOW_TO_INSTALL = "(in perfmon's source tree, after cmake -S . -B build && cmake --build build)"

-- A failure that keeps perfmon from running stays in the status bar until
-- clicked, short enough to fit and saying what to do (a message flashes
-- for 5 s, then the next one replaces it), and goes to the log
-- (core:open-log) with the details.
local function fail(summary, detail)
  core.error("perfmon: %s%s", summary, detail and ("\n" .. detail) or "")
  local name = "perfmon:failure"
  if core.status_view:get_item(name) then core.status_view:remove_item(name) end
  core.status_view:add_item {
    name = name,
    alignment = StatusView.Item.LEFT,
    position = 1,
    get_item = function() return { style.error, "perfmon: " .. summary .. " [dismiss]" } end,
    command = function() core.status_view:remove_item(name) end,
    tooltip = "perfmon is not running; the log (core:open-log) has the details",
  }
  return { failure = summary }
end

-- The usual C module (perfmon.core: the user's package.cpath, or where
-- `cmake --install` put it) loads where Lite XL exports Lua's API (built
-- with use_system_lua); Lite XL's release builds link Lua statically and
-- export none of it, so there the native build loads instead, through Lite
-- XL's native-plugin loader.  Returns perfmon, how its core loaded and why
-- the usual one did not; or nil, what failed with its fix, and the details.
local function load_perfmon()
  package.path = package.path .. (";%s/lua/?.lua;%s/lua/?/init.lua"):format(HERE, HERE)
  local ok, perfmon = pcall(require, "perfmon")
  if ok then return perfmon, "perfmon.core, the C module" end
  local usual = tostring(perfmon)
  if not package.searchpath("perfmon", package.path) then
    return nil, "not installed; " .. INSTALL, HOW_TO_INSTALL .. "\n" .. usual
  end
  local native = HERE .. PATHSEP .. "perfmon.so"
  if not system.get_file_info(native) then
    return nil, "no perfmon.so in its folder; " .. INSTALL,
      HOW_TO_INSTALL .. "\nno " .. native .. ", and the usual C module cannot load here: " .. usual
  end
  local opened, native_core = pcall(system.load_native_plugin, "perfmon", native)
  if not opened then
    return nil, ("its perfmon.so cannot load (%s); rebuild it, then %s")
      :format(tostring(native_core):match("^[^\n]*"), INSTALL),
      HOW_TO_INSTALL .. "\n" .. native .. ": " .. tostring(native_core) .. "\n" .. usual
  end
  package.loaded["perfmon.core"] = native_core
  ok, perfmon = pcall(require, "perfmon")
  if not ok then return nil, "cannot load: " .. tostring(perfmon):match("^[^\n]*"), tostring(perfmon) end
  return perfmon, "perfmon.so, the native build, through Lite XL's native-plugin loader", usual
end

local perfmon, how, detail = load_perfmon()
if not perfmon then return fail(how, detail) end
core.log_quiet("perfmon: its C core is %s%s", how,
  detail and ("; the usual C module cannot load here: " .. detail) or "")
local watcher = require "perfmon.watcher"
local plugin_watcher = require "perfmon.plugin_watcher"
local Profiler = require "perfmon.profiler"
local where = require "perfmon.where"
local model = require((...) .. ".model") -- beside this file, whatever its folder's name

-- An editor is judged by its frames: 50 ms is three frames at 60 fps, a
-- stall you feel while typing (Firefox's 64 ms is for pages).  Three in
-- half a minute is a pattern, one is a hiccup; a quarter of a core for
-- ten seconds is a plugin that drains the battery of an editor that should
-- idle.  The profiler samples on the kernel's tick, the cheap timer: no
-- signal while the editor idles; a ring of profile_seconds' worth of
-- samples, each of at least one period, holds at least the editor's last
-- profile_seconds of CPU time.
config.plugins.perfmon = common.merge({
  jank_threshold_ms = 50,
  alerts = 3,
  alerts_window_s = 30,
  cpu_percent = 25,
  cpu_window_s = 10,
  ignore = {},
  profile_seconds = 30, -- 0: no profiler, no "Perfmon: Save Profile"
  profile_rate_us = 1000,
  refresh_s = 1, -- how often the performance view takes the figures again
  mode = "exact", -- "sampled": no hook, plugins charged from samples
  rate_us = 4000, -- sampled: µs of CPU time between two samples
  diagnosis_s = 10, -- sampled: after a warning, look closer this long
  diagnosis = "sampled", -- that look: samples every 1 ms, or "exact" (the hook)
  rediagnose_s = 60, -- a plugin looked at again no sooner than this
}, config.plugins.perfmon)
local conf = config.plugins.perfmon

-- Checked here, so that an error names the key the user set
-- (config.plugins.perfmon.mode), not the argument of the function it goes to.
local core_limits = require "perfmon.core"
local function number_from(min)
  return function(v) return type(v) == "number" and v >= min and v < math.huge end
end
local function integer_in(min, max)
  return function(v) return math.type(v) == "integer" and v >= min and v <= max end
end
local OPTIONS = {
  jank_threshold_ms = { number_from(1), "a number of ms, 1 or more" },
  alerts = { integer_in(1, math.maxinteger), "a positive integer" },
  alerts_window_s = { number_from(0.001), "a positive number of seconds" },
  cpu_percent = { function(v) return type(v) == "number" and v > 0 and v <= 100 end,
    "a percentage above 0, at most 100" },
  cpu_window_s = { number_from(0.001), "a positive number of seconds" },
  ignore = { function(v)
    if type(v) ~= "table" then return false end
    for _, name in pairs(v) do if type(name) ~= "string" then return false end end
    return true
  end, 'a list of plugin names ({ "name", ... })' },
  profile_seconds = { number_from(0), "a number of seconds (0: no profiler)" },
  profile_rate_us = { integer_in(1, math.maxinteger), "a positive integer of µs" },
  refresh_s = { number_from(0.05), "a number of seconds, 0.05 or more" },
  mode = { function(v) return v == "exact" or v == "sampled" end, '"exact" or "sampled"' },
  rate_us = { integer_in(core_limits.rate_min_us, core_limits.rate_max_us),
    ("an integer from %d to %d"):format(core_limits.rate_min_us, core_limits.rate_max_us) },
  diagnosis_s = { number_from(0.001), "a positive number of seconds" },
  diagnosis = { function(v) return v == "sampled" or v == "exact" end, '"sampled" or "exact"' },
  rediagnose_s = { number_from(0.001), "a positive number of seconds" },
}
for key, check in pairs(OPTIONS) do
  local v = conf[key]
  if not check[1](v) then
    return fail(("config.plugins.perfmon.%s is %s: %s expected; fix it in init.lua")
      :format(key, type(v) == "string" and ("%q"):format(v) or tostring(v), check[2]),
      ("in %s%sinit.lua"):format(common.home_encode(USERDIR), PATHSEP))
  end
end

if conf.rediagnose_s < conf.diagnosis_s then
  return fail(("config.plugins.perfmon.rediagnose_s is %s: at least diagnosis_s (%s) expected; fix it in init.lua")
    :format(tostring(conf.rediagnose_s), tostring(conf.diagnosis_s)),
    ("in %s%sinit.lua"):format(common.home_encode(USERDIR), PATHSEP))
end

local M = { groups = {}, warnings = {}, core = how }

---------------------------------------------------------------------------
-- Plugins as groups
---------------------------------------------------------------------------

-- A plugin is a group of kind "plugin" (the user's copy and the data
-- directory's of one name are one plugin: the user's replaces the other),
-- Lite XL's core/ one of kind "core", which is not warned about, and a
-- library (docs/api.md, "Self time"): a plugin's calls into the core's API
-- (common.fuzzy_match, Doc, the tokenizer) are the plugin's self time, and
-- only what the core does on its own is the core's.  By source path,
-- because plugins share _G; chunks loaded before this plugin count from
-- now on.
local by_name = {}
local function attach(name, prefix)
  local g = by_name[name]
  if not g then
    g = perfmon.group { name = name, kind = name == "core" and "core" or "plugin", library = name == "core" }
    by_name[name] = g
    M.groups[#M.groups + 1] = g
  end
  perfmon.attach_source(prefix, g)
end

attach(model.group_of(DATADIR .. PATHSEP .. "core" .. PATHSEP, DATADIR, USERDIR))
for _, root in ipairs { DATADIR, USERDIR } do
  local dir = root .. PATHSEP .. "plugins"
  for _, entry in ipairs(system.list_dir(dir) or {}) do
    local info = system.get_file_info(dir .. PATHSEP .. entry)
    local path = dir .. PATHSEP .. entry .. (info and info.type == "dir" and PATHSEP or "")
    local name, prefix = model.group_of(path, DATADIR, USERDIR)
    if name then attach(name, prefix) end
  end
end
-- perfmon's own Lua modules, wherever package.path found them, are this
-- plugin's code
local own = model.group_of(debug.getinfo(1, "S").source:sub(2), DATADIR, USERDIR)
local lib = package.searchpath("perfmon", package.path)
if own and lib then perfmon.attach_source(lib:match("^(.*[/\\])"), by_name[own]) end

local rate_us = conf.mode == "sampled" and conf.rate_us or nil
M.monitor = perfmon.monitor { "jank", "ticks", mode = conf.mode, rate_us = rate_us }

---------------------------------------------------------------------------
-- Events: each core.step, each pass of the thread scheduler
---------------------------------------------------------------------------

local step = core.step
function core.step(...)
  return perfmon.event(step, ...)
end

-- The scheduler of core.add_thread's coroutines runs outside core.step,
-- in core.run's local run_threads: no public route reaches it, so that
-- upvalue is replaced, found and checked here, before core.run starts.
-- Plugins may have wrapped core.run (workspace does, until it first
-- runs): the original is looked for among the wrappers' upvalues too.
local function find_run_threads(fn, depth, seen)
  seen[fn] = true
  for i = 1, math.huge do
    local name, v = debug.getupvalue(fn, i)
    if name == nil then return nil end
    if name == "run_threads" and type(v) == "function" then return fn, i, v end
    if depth > 0 and type(v) == "function" and not seen[v] then
      local owner, slot, run_threads = find_run_threads(v, depth - 1, seen)
      if owner then return owner, slot, run_threads end
    end
  end
end
local owner, slot, run_threads = find_run_threads(core.run, 3, {})
if owner then
  debug.setupvalue(owner, slot, function() return perfmon.event(run_threads) end)
  M.route = "core.step and core.run's run_threads"
  core.log_quiet("perfmon: one event per core.step and one per pass of the thread scheduler "
    .. "(core.run's local run_threads, a Lite XL internal)")
else
  M.route = "core.step"
  core.warn("perfmon: no run_threads upvalue in this Lite XL's core.run: threads "
    .. "(core.add_thread) run outside events, so their jank goes unseen; CPU and self time "
    .. "per plugin still count")
end

---------------------------------------------------------------------------
-- Warnings in the status bar
---------------------------------------------------------------------------

watcher.configure { jank_threshold_us = conf.jank_threshold_ms * 1000 }
M.watcher = plugin_watcher.new {
  time = "self", -- not the plugin that wraps core.step for every other's time
  alerts = conf.alerts,
  alerts_window_ms = conf.alerts_window_s * 1000,
  cpu_percent = conf.cpu_percent,
  cpu_window_ms = conf.cpu_window_s * 1000,
  ignore = conf.ignore,
  -- the message says where the plugin's time went, from the samples of
  -- the profiler below (or, with profile_seconds = 0, the plugin watcher's
  -- own): "... ; 2.7 s in core's fuzzy_match (...), called from
  -- symbolhint/init.lua:42 (85% of 120 samples)"
  on_warning = function(w)
    M.warnings[#M.warnings + 1] = { name = w.group.name, message = w.message, where = w.where }
    core.warn("perfmon: %s", w.message)
  end,
  mode = conf.mode, -- the watcher's too
  rate_us = rate_us,
  escalate_ms = conf.mode == "sampled" and conf.diagnosis_s * 1000 or nil,
  diagnosis = conf.mode == "sampled" and conf.diagnosis or nil,
  rediagnose_ms = conf.mode == "sampled" and conf.rediagnose_s * 1000 or nil,
  on_diagnosis = function(d)
    local st = d.stats or { self_us = 0, events = 0 }
    local method, samples = "measured exactly", ""
    if d.mode == "sampled" then
      method = ("sampled every %g ms of CPU time"):format(d.rate_us / 1000)
      samples = (" (%d samples of its own)"):format(st.self_samples or 0)
    end
    core.log("perfmon: %s, %s over %.0f s: %.1f ms of its own CPU time in %d events%s",
      d.group.name, method, d.window_ms / 1000, st.self_us / 1000, st.events, samples)
  end,
}

---------------------------------------------------------------------------
-- The performance view
---------------------------------------------------------------------------

-- With the profiler, each plugin's hottest place in its samples (the last
-- profile_seconds of CPU time) too: the rows, the whole editor's, the
-- count column's name (view.lua) and the snapshot; or all of it as text.
function M.figures()
  local snap = M.monitor:snapshot()
  local places = M.profiler and where.find_all(M.profiler, 0, nil, where.libraries(snap))
  return model.rows(snap, M.groups, places), model.total(snap),
    conf.mode == "sampled" and "samples" or "ticks", snap
end

function M.text()
  local rows, _, count, snap = M.figures()
  return model.text(rows, snap, count)
end

local PerformanceView = require((...) .. ".view")
command.add(nil, {
  ["perfmon:show-performance"] = function()
    -- one view: brought to the front when it is open
    local node = M.view and core.root_view.root_node:get_node_for_view(M.view)
    if node then return node:set_active_view(M.view) end
    M.view = PerformanceView { figures = M.figures, text = M.text, refresh_s = conf.refresh_s,
      jank_ms = conf.jank_threshold_ms }
    core.root_view:get_active_node_default():add_view(M.view)
  end,
})

---------------------------------------------------------------------------
-- Profile
---------------------------------------------------------------------------

if conf.profile_seconds > 0 then
  M.profiler = Profiler.new()
  local started, err = pcall(M.profiler.start, M.profiler, conf.profile_rate_us,
    math.ceil(conf.profile_seconds * 1e6 / conf.profile_rate_us), { timer = "tick" })
  if not started then
    M.profiler = nil
    core.warn("perfmon: no profiler (config.plugins.perfmon.profile_rate_us is %s): %s",
      conf.profile_rate_us, err)
  end
end

command.add(function() return M.profiler ~= nil end, {
  ["perfmon:save-profile"] = function()
    local path = USERDIR .. PATHSEP .. os.date("perfmon-profile-%Y%m%d-%H%M%S.json")
    local saved, err = pcall(M.profiler.save, M.profiler, path)
    if saved then
      core.log("perfmon: saved the profile of (at least) the last %g s of CPU time to %s "
        .. "(open it at https://profiler.firefox.com)", conf.profile_seconds, path)
    else
      core.error("perfmon: cannot save the profile to %s: %s", path, err)
    end
  end,
})

return M
