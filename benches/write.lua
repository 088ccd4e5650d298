-- wrk script for plant-store benchmarks. MIX = requests per POST (1: W, all POSTs;
-- 10: M, 9 reads then 1 POST). Ids are unique per thread and per run, and per wrk
-- process when several run at once with different WRK_PROCESS (0, 1, ...).
local MIX = tonumber(os.getenv("MIX") or "1")
local TOKEN = os.getenv("BENCH_TOKEN") or "bench-token"
local PROCESS = tonumber(os.getenv("WRK_PROCESS") or "0")
local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end
function init(args)
  n = 0
  -- Below 2^53 and printed with %d: LuaJIT would write larger numbers as floats.
  base = (os.time() % 100000) * 100000000 + tid * 10000000 + PROCESS * 5000000
  get = wrk.format("GET", "/plants?limit=10", {["Authorization"] = "Bearer " .. TOKEN})
end
function request()
  n = n + 1
  if MIX > 1 and n % MIX ~= 0 then
    return get
  end
  local id = string.format("%d", base + n)
  return wrk.format("POST", "/plants",
    {["Authorization"] = "Bearer " .. TOKEN, ["Content-Type"] = "application/json"},
    '{"id":' .. id .. ',"name":"bench-' .. id .. '","tag":"green"}')
end
