-- mod-version:3
-- The check's quiet plugin: a little work on every pass of the threads and
-- every frame, never near a jank.
local core = require "core"
local DocView = require "core.docview"

local M = { passes = 0, draws = 0 }

core.add_thread(function()
  while true do
    local s = 0
    for i = 1, 2000 do s = s + i % 7 end
    M.passes = M.passes + 1
    coroutine.yield(0.02)
  end
end)

local draw = DocView.draw
function DocView:draw(...)
  M.draws = M.draws + 1
  return draw(self, ...)
end

return M
