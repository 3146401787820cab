-- For integrations/prosody/test/run: burns a known amount of CPU on every
-- message with a body, and keeps its own account of it with os.clock, the
-- ground truth mod_perfmon's figures are checked against.  A message to
-- perfmon-report@<host> is answered with "<seconds burnt> <messages>"; the
-- count survives a reload (the test reloads it half-way).

local st = require "util.stanza";
local jid_bare = require "util.jid".bare;

local iterations = module:get_option_number("perfmon_test_iterations", 1500000);
-- Or, where set, this many ms a message of calls into Prosody's own
-- util.stanza and util.jid, as a module that is slow through the host's
-- code is: perfmon must charge that time to this module.
local host_ms = module:get_option_number("perfmon_test_host_ms", 0);
-- Or, where set, this many calls a message of a small function of its
-- own: a fixed amount of call-heavy work, what the call/return hook of
-- an exact monitor costs most on (the load test and bench/prosody --load).
local calls = module:get_option_number("perfmon_test_calls", 0);
local report_jid = "perfmon-report@" .. module.host;

local saved = module.saved_state or {};
local burnt_s, messages = saved.burnt_s or 0, saved.messages or 0;

function module.save()
	return { burnt_s = burnt_s, messages = messages };
end

local clock = os.clock;

-- Plain arithmetic: no call the hook would see, so the time is all in this
-- module's own frame.  It touches no global (no _ENV): loaded before
-- mod_perfmon, it is told which VirtualHost's load it is by its chunk and
-- by the handler below, which touches one (module).
local function burn()
	local t0 = clock();
	local s = 0;
	for i = 1, iterations do s = s + i % 7; end
	burnt_s = burnt_s + (clock() - t0);
	return s;
end

-- Builds, serialises and parses stanzas and JIDs until host_ms have gone:
-- nearly all of it in util.stanza's and util.jid's code.
local jid_split, jid_prep = require "util.jid".split, require "util.jid".prep;
local function burn_in_host()
	local t0 = clock();
	local stop, n = t0 + host_ms / 1000, 0;
	repeat
		for _ = 1, 20 do
			local m = st.message({ to = "someone@example.com/desk", type = "chat" })
				:tag("body"):text("hello"):up()
				:tag("x", { xmlns = "urn:example" }):tag("item", { n = "1" }):up():up();
			n = n + #tostring(m) + #jid_prep("Someone@Example.COM/desk") + #jid_split("someone@example.com/desk");
		end
	until clock() >= stop;
	burnt_s = burnt_s + (clock() - t0);
	return n;
end

local function step(s, i) return (s * 31 + i) % 1000003; end
local function burn_calls()
	local t0 = clock();
	local s = 0;
	for i = 1, calls do s = step(s, i); end
	burnt_s = burnt_s + (clock() - t0);
	return s;
end

module:hook("message/bare", function(event)
	local stanza = event.stanza;
	if stanza.attr.type == "error" then return; end
	if jid_bare(stanza.attr.to) == report_jid then
		event.origin.send(st.reply(stanza):text_tag("body", ("%.6f %d"):format(burnt_s, messages)));
		return true;
	end
	if stanza:get_child_text("body") then
		if calls > 0 then burn_calls(); elseif host_ms > 0 then burn_in_host(); else burn(); end
		messages = messages + 1;
		module:log("debug", "burnt %.3f s for %d messages", burnt_s, messages);
	end
end, 10);
