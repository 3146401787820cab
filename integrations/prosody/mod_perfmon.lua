-- mod_perfmon: which Prosody module makes the server slow (perfmon, after
-- Firefox's about:performance).  A global module; README.md next to it
-- says how to install it.
--
-- Every loaded module is a perfmon group (kind "prosody-module") holding
-- its code by source path, and each VirtualHost's instance of it a group of
-- its own (kind "prosody-module-instance", "name@host") by environment.  By
-- path because a module loaded before perfmon whose functions touch no
-- global cannot be told by its environment: its chunk's main function is
-- gone, but its source path is known.  Judged on self time: mod_c2s calls
-- every stanza handler, so its inclusive time holds theirs.

module:set_global();

local perfmon = require "perfmon";
local watcher = require "perfmon.watcher";
local plugin_watcher = require "perfmon.plugin_watcher";
local buckets = require "perfmon.buckets";
local Profiler = require "perfmon.profiler";
local where = require "perfmon.where";
local modulemanager = require "core.modulemanager";
local server = require "net.server";

local KIND = "prosody-module";
local INSTANCE_KIND = "prosody-module-instance";

-- Groups live while the registry holds their handles, and the loop route
-- as long as the loop: a reload of this module takes both over
-- (module.save below).
local saved = module.saved_state or {};
local registry = saved.registry or {}; -- name -> { group, prefix, instances = { [host] = { group, env } } }
local libraries = saved.libraries; -- Prosody's own code: { { group, prefixes } }
local route = saved.route; -- the loop's turns, once installed

-- perfmon.monitor's mode: "exact" follows every call and return, "sampled"
-- costs less.  A mode it does not know fails the load before this module
-- sets anything up, and Prosody logs the error.
local mode = module:get_option_string("perfmon_mode", "exact");
if mode ~= "exact" and mode ~= "sampled" then
	error(("mod_perfmon: perfmon_mode = %q is not understood, expecting \"exact\" or \"sampled\""):format(mode), 0);
end
-- Sampled: a sample every perfmon_rate_us µs of the thread's CPU time;
-- perfmon.monitor refuses what is not a whole number in [100, 1000000].
local rate_us = mode == "sampled" and module:get_option_number("perfmon_rate_us", 4000) or nil;
local monitor = perfmon.monitor { "jank", "ticks", mode = mode, rate_us = rate_us };

---------------------------------------------------------------------------
-- Prosody's own code as libraries
---------------------------------------------------------------------------

-- The server's core (its main script, core/ and net/: the loop, stanza
-- routing, sessions) and util/ are library groups (docs/api.md, "Self
-- time"): a module's calls into util.stanza, util.jid or the core's API are
-- that module's self time, and what the core does on its own (reading
-- sockets, routing before any module's handler) is the core's.
local LIBRARY_KIND = "prosody-library";
local function library_prefixes(source, ...)
	local list = {};
	for _, dir in ipairs { ... } do list[#list + 1] = source .. "/" .. dir .. "/"; end
	return list;
end

-- The server's main script: the outermost main chunk on the stack.
local function main_script()
	local path;
	for level = 2, 200 do
		local info = debug.getinfo(level, "S");
		if not info then break; end
		if info.what == "main" and info.source:sub(1, 1) == "@" then path = info.source:sub(2); end
	end
	return path;
end

if not libraries then
	local source = prosody.paths.source or ".";
	local core = library_prefixes(source, "core", "net");
	core[#core + 1] = main_script();
	libraries = {
		{ group = perfmon.group { name = "prosody", kind = LIBRARY_KIND, library = true }, prefixes = core },
		{ group = perfmon.group { name = "util", kind = LIBRARY_KIND, library = true },
			prefixes = library_prefixes(source, "util") },
	};
	for _, lib in ipairs(libraries) do
		for _, prefix in ipairs(lib.prefixes) do perfmon.attach_source(prefix, lib.group); end
	end
end

---------------------------------------------------------------------------
-- Modules as groups
---------------------------------------------------------------------------

-- A module's code: its file, or its folder when it is one (mod_x/mod_x.lua
-- and the files it loads beside it with module:require).
local function source_prefix(path)
	return path:match("^(.*/(mod_[^/]+)/)%2%.lua$") or path;
end

local function entry_for(name, path)
	local entry = registry[name];
	if not entry then
		entry = { group = perfmon.group { name = name, kind = KIND }, instances = {} };
		registry[name] = entry;
	end
	local prefix = source_prefix(path);
	if entry.prefix ~= prefix then
		if entry.prefix then perfmon.detach_source(entry.prefix, entry.group); end
		perfmon.attach_source(prefix, entry.group);
		entry.prefix = prefix;
	end
	return entry;
end

-- The instance's environment belongs to the module's group too, so that
-- the instance is inside the module (its stats' memberships say so).
local function set_instance_env(entry, inst, env)
	if inst.env == env then return; end
	if inst.env then
		perfmon.detach(inst.env, inst.group);
		perfmon.detach(inst.env, entry.group);
	end
	if env then
		perfmon.attach(env, inst.group);
		perfmon.attach(env, entry.group);
	end
	inst.env = env;
end

-- This module is no group: its loop of turns is on the stack all the time,
-- so its inclusive time would be the whole server's.
local function follow(host, name)
	local env = modulemanager.get_module(host, name);
	if name == module.name or not (env and env.module.path) then return; end
	local entry = entry_for(name, env.module.path);
	-- a global module has no VirtualHost instance, and a shared one's
	-- instances run the global one's code
	if host == "*" or modulemanager.is_loaded("*", name) then return; end
	local inst = entry.instances[host];
	if not inst then
		inst = { group = perfmon.group { name = name .. "@" .. host, kind = INSTANCE_KIND } };
		entry.instances[host] = inst;
	end
	set_instance_env(entry, inst, env);
end

local function loaded_anywhere(name)
	if modulemanager.is_loaded("*", name) then return true; end
	for host in pairs(prosody.hosts) do
		if modulemanager.is_loaded(host, name) then return true; end
	end
	return false;
end

local function forget(host, name)
	local entry = registry[name];
	if not entry then return; end
	local inst = entry.instances[host];
	if inst then set_instance_env(entry, inst, nil); end
	if entry.prefix and not loaded_anywhere(name) then
		perfmon.detach_source(entry.prefix, entry.group);
		entry.prefix = nil;
	end
end

local function on_loaded(event) follow(event.host, event.module); end
local function on_unloaded(event) forget(event.host, event.module); end

-- module-loaded and friends fire on the host's own events ("*": Prosody's).
local function follow_host(host_module)
	host_module:hook("module-loaded", on_loaded);
	host_module:hook("module-reloaded", on_loaded);
	host_module:hook("module-unloaded", on_unloaded);
	for name in pairs(modulemanager.get_modules(host_module.host)) do
		follow(host_module.host, name);
	end
end

follow_host(module);
module.add_host = follow_host;

---------------------------------------------------------------------------
-- One perfmon event per turn of the server loop
---------------------------------------------------------------------------

-- net.server has no per-turn callback, but its public loop(once) runs one
-- turn, and Prosody's main script looks server.loop up when it starts to
-- loop, after modules_enabled are loaded: a loop of bracketed turns put in
-- its place is the loop that runs.  Only epoll's loop(once) reports the
-- shutdown (select's returns nothing), so other backends are not bracketed.
local function install_route()
	local loop_once = server.loop;
	local r = { bracket = true, turns = 0 };
	local function turn()
		r.turns = r.turns + 1;
		if r.bracket then return perfmon.event(loop_once, true); end
		return loop_once(true);
	end
	function server.loop(once)
		if once then return turn(); end
		while not turn() do end
		return loop_once(); -- shutting down: the last connections close
	end
	return r;
end

local backend = server.get_backend();
if not route and backend == "epoll" then route = install_route(); end

-- Alerts wait buffering_delay_ms and are delivered at an event's end; this
-- wakes an idle loop to deliver them.  Without turns (the fallback) poll
-- delivers them and samples the CPU windows itself.
module:add_timer(1, function()
	watcher.poll();
	return 1;
end);

-- Timers run inside the loop: if no turn of ours has run by the first one,
-- the loop started before this module loaded (it was loaded at run time).
module:add_timer(0, function()
	if route and route.turns > 0 then
		module:log("info", "one perfmon event per turn of the server loop (net.server.loop(once), %s)", backend);
	else
		module:log("warn", "no perfmon event per turn of the server loop (%s): %s; "
			.. "CPU and self time per module still count and warnings come from CPU share; "
			.. "no jank warnings until Prosody restarts with mod_perfmon in modules_enabled",
			backend, route and "the loop was already running when mod_perfmon loaded" or "only the epoll backend is bracketed");
	end
end);

---------------------------------------------------------------------------
-- Warnings in Prosody's log
---------------------------------------------------------------------------

-- A server is not a browser: no frame to miss, but one thread serves every
-- session, so a module that holds it 50 ms holds up every stanza in flight.
-- A single jank is a GC pause or a burst of logins; five a minute is a
-- pattern.  A quarter of the thread for a whole minute without janking is a
-- busy module.  Every default has an option.
watcher.configure { jank_threshold_us = module:get_option_number("perfmon_jank_threshold", 50) * 1000 };
local pw = plugin_watcher.new {
	kind = KIND,
	time = "self", -- not mod_c2s for the handlers it calls
	alerts = module:get_option_number("perfmon_alerts", 5),
	alerts_window_ms = module:get_option_number("perfmon_alerts_window", 60) * 1000,
	cpu_percent = module:get_option_number("perfmon_cpu_percent", 25),
	cpu_window_ms = module:get_option_number("perfmon_cpu_window", 60) * 1000,
	ignore = module:get_option_array("perfmon_ignore", {}),
	-- the message says where the module's time went, from the samples of
	-- the plugin watcher's own profiler (a sample every 10 ms of CPU):
	-- "...; 1.2 s in its own burn at mod_x.lua:28 (96% of 118 samples)"
	on_warning = function(w) module:log("warn", "%s", w.message); end,
	-- sampled: the watcher too; a warning then measures exactly for a while
	mode = mode,
	rate_us = rate_us,
	escalate_ms = mode == "sampled" and module:get_option_number("perfmon_diagnosis", 10) * 1000 or nil,
	on_diagnosis = function(d)
		local st = d.stats or { self_us = 0, cpu_us = 0, events = 0 };
		module:log("warn", "%s, measured exactly over %.0f s: %.1f ms of its own CPU time (%.1f ms with what it calls) in %d events",
			d.group.name, d.window_ms / 1000, st.self_us / 1000, st.cpu_us / 1000, st.events);
	end,
};

---------------------------------------------------------------------------
-- about:performance in the admin shell: prosodyctl shell perfmon show
---------------------------------------------------------------------------

-- The bucket of the longest event counted in durations.
local function longest(durations)
	return buckets.name(buckets.longest(durations));
end

local ROW = "%-28s %9.1f %9.1f %6.1f%% %8d  %-10s %-32s  %s";
local HEAD = "%-28s %9s %9s %7s %8s  %-10s %-32s  %s";
-- The column of counts: the times a module's code was entered, which a
-- sampled monitor does not count; there, the samples its self time is
-- made of.
local COUNT = mode == "sampled" and "samples" or "ticks";
local COUNT_FIELD = mode == "sampled" and "self_samples" or "ticks";

-- hottest: where its self time went in the profiler's samples
-- (where.brief), or none.
local function row(label, st, process, hottest)
	return (ROW:format(label, st.self_us / 1000, st.cpu_us / 1000,
		100 * st.self_us / math.max(process.cpu_us, 1), st[COUNT_FIELD],
		longest(st.self_durations), buckets.histogram(st.self_durations), hottest or ""):gsub("%s+$", ""));
end

-- The VirtualHost instances of a module loaded on several.
local function live_instances(entry)
	local live = {};
	for host, inst in pairs(entry.instances) do
		if inst.env then live[#live + 1] = { host = host, group = inst.group }; end
	end
	table.sort(live, function(a, b) return a.host < b.host; end);
	return #live > 1 and live or {};
end

-- Modules by self time, busiest first, each VirtualHost's instance below;
-- and where each one's time went in the samples of the profiler running
-- (the plugin watcher's own, or another's).
local function performance_table(snap)
	local profiler = Profiler.running();
	local places = profiler and where.find_all(profiler, 0, nil, where.libraries(snap)) or {};
	local function hottest(group)
		return profiler and (places[group.id] and where.brief(places[group.id]) or "-") or "";
	end
	local entries = {};
	for _, entry in pairs(registry) do
		if entry.prefix then entries[#entries + 1] = entry; end
	end
	local function self_us(entry) return snap.groups[entry.group.id].self_us; end
	table.sort(entries, function(a, b)
		if self_us(a) ~= self_us(b) then return self_us(a) > self_us(b); end
		return a.group.name < b.group.name;
	end);
	local lines = { (HEAD:format("module", "self ms", "cpu ms", "share", COUNT, "longest",
		"self jank histogram (ms:events)", profiler and "hottest (the profiler's samples)" or ""):gsub("%s+$", "")) };
	for _, entry in ipairs(entries) do
		lines[#lines + 1] = row(entry.group.name, snap.groups[entry.group.id], snap.process, hottest(entry.group));
		for _, inst in ipairs(live_instances(entry)) do
			-- the profiler names a function's module, not its instance
			lines[#lines + 1] = row("  @" .. inst.host, snap.groups[inst.group.id], snap.process, "");
		end
	end
	-- Prosody's own code: what it did on its own (self) and for the
	-- modules (cpu)
	for _, lib in ipairs(libraries) do
		lines[#lines + 1] = row(("(%s: library)"):format(lib.group.name), snap.groups[lib.group.id], snap.process,
			hottest(lib.group));
	end
	lines[#lines + 1] = row("(whole server)", snap.process, snap.process, "");
	return lines;
end

local shell_env = module:shared("/*/admin_shell/env");
shell_env.perfmon = {};
function shell_env.perfmon:show()
	for _, line in ipairs(performance_table(monitor:snapshot())) do self.session.print(line); end
	return true, "CPU time per module since mod_perfmon loaded (self: its own code, share: of the server's)";
end

---------------------------------------------------------------------------
-- Statistics: module:metric, served by mod_http_openmetrics
---------------------------------------------------------------------------

local metrics = {
	cpu = module:metric("counter", "cpu", "seconds", "CPU time with the module's code on the stack (perfmon)", { "module" }),
	self_cpu = module:metric("counter", "self_cpu", "seconds", "CPU time in the module's own code (perfmon)", { "module" }),
	ticks = module:metric("counter", "ticks", "", "Times execution entered the module's code (perfmon)", { "module" }),
	jank = module:metric("counter", "self_jank_events", "", "Server-loop turns in which the module's own code ran at least min_ms (perfmon)", { "module", "min_ms" }),
};

local function publish(name, st)
	metrics.cpu:with_labels(name):set(st.cpu_us / 1e6);
	metrics.self_cpu:with_labels(name):set(st.self_us / 1e6);
	metrics.ticks:with_labels(name):set(st.ticks);
	for k, n in ipairs(st.self_durations) do
		metrics.jank:with_labels(name, ("%d"):format(2 ^ (k - 1))):set(n);
	end
end

module:hook("stats-update", function()
	local snap = monitor:snapshot();
	for name, entry in pairs(registry) do
		if entry.prefix then publish(name, snap.groups[entry.group.id]); end
	end
end);

---------------------------------------------------------------------------
-- Reload and unload
---------------------------------------------------------------------------

function module.save()
	return { registry = registry, route = route, libraries = libraries };
end

local function detach_all()
	for _, entry in pairs(registry) do
		for _, inst in pairs(entry.instances) do set_instance_env(entry, inst, nil); end
		if entry.prefix then perfmon.detach_source(entry.prefix, entry.group); end
		entry.prefix = nil;
	end
	for _, lib in ipairs(libraries) do
		for _, prefix in ipairs(lib.prefixes) do perfmon.detach_source(prefix, lib.group); end
	end
end

function module.unload()
	shell_env.perfmon = nil;
	pw:close();
	monitor:close();
	if module.reloading then return; end
	if route then route.bracket = false; end
	detach_all();
end
