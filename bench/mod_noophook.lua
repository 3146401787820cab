-- mod_noophook: the no-op call/return hook of noophook.so (bench/noophook.c)
-- on every thread of a Prosody server, the floor mod_perfmon's exact mode
-- is compared with in bench/prosody.
--
-- perfmon's monitor hooks the main thread and every coroutine alive when it
-- opens, and later ones inherit the hook from their creator.  Modules load
-- inside util.async's start-up runner, not on the main thread that runs the
-- server loop and creates the sessions' runners: set() alone would hook the
-- start-up coroutine only.  So this hooks every thread reachable from the
-- registry (the main thread among them; one not reachable can never run
-- again), and then checks that the hook is there where it matters: in the
-- loop's timers and in the coroutine that handles a message.
--
-- util.async gives each runner's coroutine its creator's hook with
-- debug.sethook(co, debug.gethook()), which a C hook breaks (gethook says
-- "external hook", a string sethook refuses).  While a monitor is open
-- perfmon makes the two its own (lua/perfmon/init.lua): gethook returns the
-- program's hook, none here, and setting none leaves perfmon's in place.
-- The same is done here for the no-op hook, so that runners keep it as
-- they keep perfmon's.

module:set_global();

local noophook = require "noophook";

-- Every thread reachable from the registry, through tables (raw, keys and
-- values), metatables, upvalues, user values and the stacks of threads.
local function reachable_threads()
	local seen, todo, threads = {}, { debug.getregistry(), (coroutine.running()) }, {};
	local function see(v)
		local t = type(v);
		if v ~= nil and not seen[v] and (t == "table" or t == "function" or t == "userdata" or t == "thread") then
			seen[v] = true;
			todo[#todo + 1] = v;
		end
	end
	while #todo > 0 do
		local v = table.remove(todo);
		local t = type(v);
		see(debug.getmetatable(v));
		if t == "table" then
			for k, x in next, v do see(k); see(x); end
		elseif t == "function" then
			for i = 1, math.huge do
				local name, x = debug.getupvalue(v, i);
				if not name then break; end
				see(x);
			end
		elseif t == "userdata" then
			for i = 1, math.huge do
				local x, ok = debug.getuservalue(v, i);
				if not ok then break; end
				see(x);
			end
		elseif t == "thread" then
			threads[#threads + 1] = v;
			for level = 0, math.huge do
				local info = debug.getinfo(v, level, "f");
				if not info then break; end
				see(info.func);
				for _, step in ipairs { 1, -1 } do -- locals and temporaries, then varargs
					for i = step, step * math.huge, step do
						local name, x = debug.getlocal(v, level, i);
						if not name then break; end
						see(x);
					end
				end
			end
		end
	end
	return threads;
end

local raw_sethook, raw_gethook = debug.sethook, debug.gethook;

function debug.gethook(co)
	if noophook.isset(co) then return nil; end
	return raw_gethook(co);
end

function debug.sethook(...)
	local co, hook = ...;
	if type(co) ~= "thread" then co, hook = nil, co; end
	if hook == nil and noophook.isset(co) then return; end
	return raw_sethook(...);
end

local threads = reachable_threads();
for _, co in ipairs(threads) do noophook.set(co); end
module:log("info", "no-op call/return hook on %d threads", #threads);

local function check(where)
	if not noophook.isset() then module:log("error", "no no-op hook on the thread of %s", where); end
end

module:add_timer(0, function() check("a timer"); end);

function module.add_host(host_module)
	local function on_message()
		check("a message");
		host_module:unhook("message/bare", on_message);
	end
	host_module:hook("message/bare", on_message, 1000);
end
