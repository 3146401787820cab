-- indexer: an expensive plugin for tests/host.c.
--
-- Every event it burns ~5 ms of CPU "indexing", and every 10th event it
-- fails after doing so: the host catches the error with lua_pcall.

local BURN_MS = 5

local function burn(ms)
  local stop = os.clock() + ms / 1000
  local x = 0
  repeat
    for k = 1, 200 do x = x + k % 7 end
  until os.clock() >= stop
  return x
end

local indexed = 0

function on_event(i)
  burn(BURN_MS)
  if i % 10 == 0 then
    error(("index corrupted at event %d"):format(i))
  end
  indexed = indexed + 1
  return indexed
end
