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
local text_table = require "perfmon.table";
local Profiler = require "perfmon.profiler";
local where = require "perfmon.where";
local modulemanager = require "core.modulemanager";
local server = require "net.server";

local KIND = "prosody-module";
local INSTANCE_KIND = "prosody-module-instance";

-- Groups live while the registry holds their handles, and the events'
-- wrapping as long as the server: a reload of this module takes both over
-- (module.save below).
local saved = module.saved_state or {};
local registry = saved.registry or {}; -- name -> { group, prefix, instances = { [host] = { group, env } } }
local libraries = saved.libraries; -- Prosody's own code: { { group, prefixes } }

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
-- The diagnosis after a warning in sampled mode: "sampled" at a higher
-- rate, or "exact" (the call/return hook, some 2.4x the cost on call-heavy
-- code while it runs).
local diagnosis_mode = module:get_option_string("perfmon_diagnosis_mode", "sampled");
if diagnosis_mode ~= "sampled" and diagnosis_mode ~= "exact" then
	error(("mod_perfmon: perfmon_diagnosis_mode = %q is not understood, expecting \"sampled\" or \"exact\"")
		:format(diagnosis_mode), 0);
end
-- Sampled: the timer, "tick" (the thread's CPU clock, checked at each
-- scheduler tick: at most one sample a tick, HZ a second) or "cpu" (a perf
-- event on the thread's CPU time: any rate, but the kernel starts and
-- stops its timer each time the thread wakes and sleeps, some 2.5 µs a
-- wake in a virtual machine, and a server wakes for every read).  Every
-- sampled monitor runs on the one this module's opens first.
local timer = mode == "sampled" and module:get_option_string("perfmon_timer", "tick") or nil;
if timer and timer ~= "tick" and timer ~= "cpu" then
	error(("mod_perfmon: perfmon_timer = %q is not understood, expecting \"tick\" or \"cpu\""):format(timer), 0);
end
local monitor = perfmon.monitor { "jank", "ticks", mode = mode, rate_us = rate_us, timer = timer };

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
-- One perfmon event per unit of work
---------------------------------------------------------------------------

-- A unit of work is one callback the network backend makes for one
-- connection (a listener's onincoming, ondrain, onconnect, ondisconnect,
-- onstatus, onreadtimeout...) or one timer.  A turn of the loop is not: the
-- epoll backend's serves every ready connection before it returns, and
-- lasted 27 s under load.  Both backends (epoll, select) take listeners as
-- tables handed to net.server's public functions (listen, addserver,
-- wrapserver, addclient, wrapclient; portmanager, net.connect and the admin
-- socket use them) and call their on* fields, so each such table has its
-- callbacks wrapped in place the first time it is seen: as it is handed
-- over, when it is a service's already listening, or when a connection
-- whose callback just ran was given it by setlistener (net.connect,
-- mod_websocket).  Timers are wrapped as net.server's add_task and
-- util.timer's add_task take them (module:add_timer goes through the
-- latter).  Timers and listeners set before mod_perfmon loaded that are no
-- service's are not events: their work counts in the totals, not in any
-- event's time.  The wrapping outlives a reload (module.save) and is
-- undone by an unload.
local util_timer = require "util.timer";
local portmanager = require "core.portmanager";
-- Whether an event is open in the running loop (perfmon.busted reads it
-- too): a callback inside another's (a write that drains another
-- connection at once, a module calling a listener itself) is part of it.
local event_open = require "perfmon.loader".counts;

-- The wrapping's state: bracket (false once unloaded), the wrapped
-- listener tables (weak: a reloaded module's old one goes) with the
-- functions they held, and the public functions replaced.
local events = saved.events;

local function install_events()
	local ev = { bracket = true, listeners = setmetatable({}, { __mode = "k" }), replaced = {} };

	local function run(fn, ...)
		if not ev.bracket or select(3, event_open()) then return fn(...); end
		return perfmon.event(fn, ...);
	end

	local wrap_listeners;
	-- After a connection's callback: the listeners setlistener gave it
	-- (epoll keeps them in the connection; select in its closures, so
	-- there the next connection given the same table is an event).
	local function settle(conn, ...)
		local l = type(conn) == "table" and rawget(conn, "listeners");
		if type(l) == "table" and not ev.listeners[l] then wrap_listeners(l); end
		return ...;
	end
	local function as_event(fn)
		return function(conn, ...)
			if not ev.bracket or select(3, event_open()) then return fn(conn, ...); end
			return settle(conn, perfmon.event(fn, conn, ...));
		end
	end

	-- onerror is the backend's error handler, called inside the callback
	-- that failed, not a callback of its own.
	function wrap_listeners(l)
		if ev.listeners[l] then return; end
		local callbacks = {}; -- name -> { the original, its wrapper }
		for k, fn in pairs(l) do
			if type(k) == "string" and k:match("^on") and k ~= "onerror" and type(fn) == "function" then
				callbacks[k] = { fn, as_event(fn) };
			end
		end
		for k, pair in pairs(callbacks) do l[k] = pair[2]; end
		ev.listeners[l] = callbacks;
	end

	local function replace(t, k, make)
		local original = t[k];
		if type(original) ~= "function" then return; end
		t[k] = make(original);
		ev.replaced[#ev.replaced + 1] = { t, k, original, t[k] };
	end
	-- (listeners at argument n)
	local function takes_listeners(n)
		return function(original)
			return function(...)
				local l = select(n, ...);
				if type(l) == "table" then wrap_listeners(l); end
				return original(...);
			end
		end
	end
	replace(server, "listen", takes_listeners(3));
	replace(server, "addserver", takes_listeners(3));
	replace(server, "addclient", takes_listeners(3));
	replace(server, "wrapclient", takes_listeners(4));
	if server.get_backend() == "epoll" then replace(server, "wrapserver", takes_listeners(4)); end
	replace(server, "watchfd", function(original)
		return function(fd, onreadable, onwritable)
			return original(fd, onreadable and as_event(onreadable), onwritable and as_event(onwritable));
		end
	end);
	local function takes_task(original)
		return function(delay, fn, ...)
			if type(fn) ~= "function" then return original(delay, fn, ...); end
			return original(delay, function(...) return run(fn, ...); end, ...);
		end
	end
	replace(server, "add_task", takes_task);
	-- epoll: util.timer is server.timer
	replace(util_timer, "add_task", takes_task);
	if server.timer and server.timer ~= util_timer then replace(server.timer, "add_task", takes_task); end

	-- services listening already (modules loaded before this one)
	for _, list in pairs(portmanager.get_registered_services()) do
		for _, service in ipairs(list) do
			if type(service.listener) == "table" then wrap_listeners(service.listener); end
		end
	end
	return ev;
end

-- Back as they were, where nothing replaced them since.
local function uninstall_events(ev)
	ev.bracket = false;
	for i = #ev.replaced, 1, -1 do
		local t, k, original, ours = table.unpack(ev.replaced[i]);
		if t[k] == ours then t[k] = original; end
	end
	for l, originals in pairs(ev.listeners) do
		for k, pair in pairs(originals) do
			if l[k] == pair[2] then l[k] = pair[1]; end
		end
	end
end

events = events or install_events();

-- Alerts wait buffering_delay_ms and are delivered at an event's end; this
-- wakes an idle server to deliver them, and samples the CPU windows.
module:add_timer(1, function()
	watcher.poll();
	return 1;
end);

module:log("info", "one perfmon event per network callback and timer (%s backend)", server.get_backend());

---------------------------------------------------------------------------
-- Warnings in Prosody's log
---------------------------------------------------------------------------

-- A server is not a browser: no frame to miss, but one thread serves every
-- session, so a module that holds it 50 ms holds up every stanza in flight.
-- A single jank is a GC pause or a burst of logins; five a minute is a
-- pattern.  A module that costs a few ms a stanza never janks (an event
-- handles one read of one connection), but a quarter of the thread for
-- 10 s is a busy module, and an operator hears of it within seconds.  Every
-- default has an option.
--
-- A reload starts a new plugin watcher, which knows nothing of the old
-- one's warnings: the last warning about each module (wall time, and the
-- window within which it is not repeated) outlives it.
local warned = saved.warned or {};
local diagnosis_s = module:get_option_number("perfmon_diagnosis", 10);
local escalate_ms = mode == "sampled" and diagnosis_s > 0 and diagnosis_s * 1000 or nil;
-- a module busy all the time is warned about every CPU window: diagnosed
-- again only this long after its last diagnosis began
local rediagnose_s = module:get_option_number("perfmon_rediagnose", math.max(60, diagnosis_s));
if escalate_ms and rediagnose_s < diagnosis_s then
	error(("mod_perfmon: perfmon_rediagnose = %s is shorter than the diagnosis (perfmon_diagnosis = %s s)")
		:format(tostring(rediagnose_s), tostring(diagnosis_s)), 0);
end
watcher.configure { jank_threshold_us = module:get_option_number("perfmon_jank_threshold", 50) * 1000 };
local pw = plugin_watcher.new {
	kind = KIND,
	time = "self", -- not mod_c2s for the handlers it calls
	alerts = module:get_option_number("perfmon_alerts", 5),
	alerts_window_ms = module:get_option_number("perfmon_alerts_window", 60) * 1000,
	cpu_percent = module:get_option_number("perfmon_cpu_percent", 25),
	cpu_window_ms = module:get_option_number("perfmon_cpu_window", 10) * 1000,
	ignore = module:get_option_array("perfmon_ignore", {}),
	-- the message says where the module's time went, from the samples of
	-- the plugin watcher's own profiler (a sample every 10 ms of CPU):
	-- "...; 1.2 s in its own burn at mod_x.lua:28 (96% of 118 samples)"
	on_warning = function(w)
		local last = warned[w.group.name];
		if last and os.time() - last.at < last.window_s then return; end
		warned[w.group.name] = { at = os.time(), window_s = w.window_ms / 1000 };
		module:log("warn", "%s", w.message);
	end,
	-- sampled: the watcher too; a warning then opens a diagnosis, a
	-- closer look for a while (perfmon_diagnosis = 0: none)
	mode = mode,
	rate_us = rate_us,
	escalate_ms = escalate_ms,
	diagnosis = escalate_ms and diagnosis_mode or nil,
	rediagnose_ms = escalate_ms and rediagnose_s * 1000 or nil,
	on_diagnosis = function(d)
		local st = d.stats or { self_us = 0, cpu_us = 0, events = 0 };
		local method, samples = "measured exactly", "";
		if d.mode == "sampled" then
			samples = (" (%d samples of its own)"):format(st.self_samples or 0);
			method = ("sampled every %g ms of CPU time"):format(d.rate_us / 1000);
			if perfmon.info().sampled_timer == "tick" then
				-- at most one sample a scheduler tick, whatever rate was asked
				local w = d.window or { samples = 0 };
				method = w.samples > 0
					and ("sampled at scheduler ticks, one every %.1f ms of CPU time"):format(w.cpu_us / w.samples / 1000)
					or "sampled at scheduler ticks (none came)";
			end
		end
		module:log("warn", "%s, %s over %.0f s: %.1f ms of its own CPU time (%.1f ms with what it calls) in %d events%s",
			d.group.name, method, d.window_ms / 1000, st.self_us / 1000, st.cpu_us / 1000, st.events, samples);
	end,
};

---------------------------------------------------------------------------
-- about:performance in the admin shell: prosodyctl shell perfmon show
---------------------------------------------------------------------------

-- The count column: the times a module's code was entered, which a
-- sampled monitor does not count; there, the samples its self time is
-- made of.
local COUNT = mode == "sampled" and "samples" or "ticks";
local COUNT_FIELD = mode == "sampled" and "self_samples" or "ticks";

local function ms(us) return us / 1000; end
local COLUMNS = text_table.performance_columns("module", COUNT, true);

-- A row of the table: a group's figures (st), against the process's.
local function row(name, st, process, hottest)
	return { name = name, self_ms = ms(st.self_us), cpu_ms = ms(st.cpu_us),
		share = 100 * st.self_us / math.max(process.cpu_us, 1), count = st[COUNT_FIELD],
		longest = buckets.name(buckets.longest(st.self_durations)),
		histogram = buckets.histogram(st.self_durations), hottest = hottest };
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

-- The modules followed, busiest first (self time in snap).
local function modules_by_self(snap)
	local entries = {};
	for _, entry in pairs(registry) do
		if entry.prefix then entries[#entries + 1] = entry; end
	end
	local function self_us(entry) return snap.groups[entry.group.id].self_us; end
	table.sort(entries, function(a, b)
		if self_us(a) ~= self_us(b) then return self_us(a) > self_us(b); end
		return a.group.name < b.group.name;
	end);
	return entries;
end

-- Modules by self time, busiest first, each VirtualHost's instance folded
-- under it unless unfold; and where each one's time went in the samples of
-- the profiler running (the plugin watcher's own, or another's).
local function performance_table(snap, unfold)
	local profiler = Profiler.running();
	local places = profiler and where.find_all(profiler, 0, nil, where.libraries(snap)) or {};
	local function hottest(group)
		return profiler and (places[group.id] and where.brief(places[group.id]) or "-") or nil;
	end
	local rows = {};
	for _, entry in ipairs(modules_by_self(snap)) do
		local r = row(entry.group.name, snap.groups[entry.group.id], snap.process, hottest(entry.group));
		r.children = {};
		for _, inst in ipairs(live_instances(entry)) do
			-- the profiler names a function's module, not its instance
			r.children[#r.children + 1] = row("@" .. inst.host, snap.groups[inst.group.id], snap.process);
		end
		rows[#rows + 1] = r;
	end
	-- Prosody's own code: what it did on its own (self) and for the
	-- modules (cpu)
	for _, lib in ipairs(libraries) do
		rows[#rows + 1] = row(("(%s: library)"):format(lib.group.name), snap.groups[lib.group.id], snap.process,
			hottest(lib.group));
	end
	rows[#rows + 1] = row("(whole server)", snap.process, snap.process);
	return text_table.render(COLUMNS, rows, { unfold = unfold });
end

-- perfmon:show() folds each module's VirtualHost instances under it (its
-- row says how many: "c2s (2)"); with any argument, perfmon:show(true) or
-- prosodyctl shell perfmon show all, it lists them.
local shell_env = module:shared("/*/admin_shell/env");
shell_env.perfmon = {};
function shell_env.perfmon:show(instances)
	for _, line in ipairs(performance_table(monitor:snapshot(), instances)) do self.session.print(line); end
	return true, "CPU time per module since mod_perfmon loaded (self: its own code, share: of the server's)"
		.. (instances and "" or "; perfmon:show(true) lists each VirtualHost's instance (prosodyctl shell perfmon show all)");
end

---------------------------------------------------------------------------
-- Statistics: module:metric, served by mod_http_openmetrics
---------------------------------------------------------------------------

-- Prosody collects them every statistics_interval seconds (60 by
-- default: /metrics serves figures up to that old), or at each scrape with
-- statistics_interval = "manual".  Jank is a histogram in seconds:
-- perfmon's durations[k] counts the events of at least 2^(k-1) ms (k =
-- 1..10); an OpenMetrics bucket le=x counts the events of at most x, so
-- le = 2^(k-1) ms counts those not in durations[k] (an event of exactly
-- 2^(k-1) ms, in µs, is one bucket higher), and +Inf all of them.
-- (a list of its own for each family: Prosody appends +Inf to it)
local function le()
	local list = {};
	for k = 0, buckets.count - 1 do list[#list + 1] = 2 ^ k / 1000; end
	return list;
end

local function family(kind, name, unit, description, labels)
	return module:metric(kind, name, unit, description, labels, kind == "histogram" and { buckets = le() } or nil);
end
local metrics = {
	cpu = family("counter", "cpu", "seconds", "CPU time with the module's code on the stack (perfmon)", { "module" }),
	self_cpu = family("counter", "self_cpu", "seconds", "CPU time in the module's own code (perfmon)", { "module" }),
	ticks = family("counter", "ticks", "", "Times execution entered the module's code (perfmon, exact mode)", { "module" }),
	jank = family("histogram", "self_jank", "seconds", "The module's own CPU time in each event it ran in (perfmon)", { "module" }),
	host_cpu = family("counter", "instance_cpu", "seconds", "CPU time with the VirtualHost's instance of the module on the stack (perfmon)", { "module", "host" }),
	host_self_cpu = family("counter", "instance_self_cpu", "seconds", "CPU time in the VirtualHost's instance's own code (perfmon)", { "module", "host" }),
	host_jank = family("histogram", "instance_self_jank", "seconds", "The instance's own CPU time in each event it ran in (perfmon)", { "module", "host" }),
	events = family("histogram", "event", "seconds", "The server's CPU time in each event: a network callback or timer (perfmon)", {}),
};

-- A histogram metric of util.statistics (statistics = "internal"): its
-- buckets in order, then _sum and _count, set from perfmon's counts,
-- which are totals already (sample() takes one observation at a time).
local function set_histogram(h, durations, n, sum_s)
	if type(h[1]) ~= "table" or h[1].count == nil then return; end
	for k = 1, buckets.count do h[k].count = n - durations[k]; end
	h[buckets.count + 1].count = n; -- +Inf
	h._sum, h._count = sum_s, n;
end

local function publish(name, st)
	metrics.cpu:with_labels(name):set(st.cpu_us / 1e6);
	metrics.self_cpu:with_labels(name):set(st.self_us / 1e6);
	if mode == "exact" then metrics.ticks:with_labels(name):set(st.ticks); end
	set_histogram(metrics.jank:with_labels(name), st.self_durations, st.events, st.self_event_us / 1e6);
end

local function publish_instance(name, host, st)
	metrics.host_cpu:with_labels(name, host):set(st.cpu_us / 1e6);
	metrics.host_self_cpu:with_labels(name, host):set(st.self_us / 1e6);
	set_histogram(metrics.host_jank:with_labels(name, host), st.self_durations, st.events, st.self_event_us / 1e6);
end

-- Modules that never ran have no series: rendering /metrics is Prosody's
-- own work (util.openmetrics), and grows with every series.
local function ran(st) return st.cpu_us > 0 or st.events > 0; end

module:hook("stats-update", function()
	local snap = monitor:snapshot();
	for name, entry in pairs(registry) do
		local st = snap.groups[entry.group.id];
		if entry.prefix and ran(st) then
			publish(name, st);
			for host, inst in pairs(entry.instances) do
				local ist = snap.groups[inst.group.id];
				if inst.env and ran(ist) then publish_instance(name, host, ist); end
			end
		end
	end
	set_histogram(metrics.events:with_labels(), snap.process.durations, snap.process.events, snap.process.event_us / 1e6);
end);

---------------------------------------------------------------------------
-- Reload and unload
---------------------------------------------------------------------------

function module.save()
	return { registry = registry, events = events, libraries = libraries, warned = warned };
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
	uninstall_events(events);
	detach_all();
end
