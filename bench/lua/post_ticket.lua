-- POST /v1/tickets: a ticket with three lines (labor, equipment, materials) and no photos.
-- No client_ref, so every request makes a new ticket.
package.path = os.getenv("BENCH_LUA_DIR") .. "/?.lua;" .. package.path
local report = require("report")

wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY")
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"project_id":"' .. os.getenv("BENCH_PROJECT") .. '",' ..
  '"description":"Cut and patched the slab for a plumbing sleeve the plumber missed",' ..
  '"reason":"Sleeve was left out by the plumbing sub; not in our concrete scope",' ..
  '"directed_by":"Sam Ortiz, GC superintendent","captured_by":"Lee Park",' ..
  '"labor":[{"trade":"Concrete finisher","workers":2,"hours":3,"rate":72.5,"costCode":"03-300"}],' ..
  '"equipment":[{"description":"Core drill","hours":2,"rate":45,"costCode":"03-300"}],' ..
  '"materials":[{"description":"Non-shrink grout","quantity":3,"unitCost":29,"costCode":"03-300"}]}'

done = report.done
