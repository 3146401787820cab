-- The editor demo (tools/run demo): an editor host replays a scripted
-- session with five plugins, one of which janks on every keystroke and one
-- of which blocks on every save; perfmon's plugin watcher names them as it
-- happens, and the table at the end shows where the time went.
--
--   lua5.4 examples/editor/main.lua
-- (with LUA_PATH/LUA_CPATH finding perfmon, as tools/run sets them)
local dir = arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
if select("#", ...) > 0 then
  io.stderr:write("usage: lua5.4 examples/editor/main.lua (no arguments)\n")
  os.exit(2)
end
require("editor").main { dir = dir }
