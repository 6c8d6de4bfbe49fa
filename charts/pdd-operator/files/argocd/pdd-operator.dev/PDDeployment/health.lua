-- Argo CD health check for pdd-operator.dev/PDDeployment.
-- Runs in Argo CD's Lua VM (gopher-lua, Lua 5.1) with only the base, table and package libraries and
-- a safe os: no string library, so no string methods and no string.format; `..` and tostring only.
-- Order (as kstatus): not yet observed -> Progressing; cannot progress without a spec change
-- (Stalled, Compatible=False, Degraded) -> Degraded; rolling out -> Progressing; Ready -> Healthy.
local function condition(t)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == t then
      return c
    end
  end
  return nil
end

local function is(c, value)
  return c ~= nil and c.status == value
end

local function text(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    if c.reason ~= nil and c.reason ~= "" then
      return c.reason .. ": " .. c.message
    end
    return c.message
  end
  return fallback
end

local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for pdd-operator to report status"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for pdd-operator to observe generation " .. tostring(generation)
  return hs
end

local stalled = condition("Stalled")
local compatible = condition("Compatible")
local degraded = condition("Degraded")
if is(stalled, "True") then
  hs.status = "Degraded"
  hs.message = text(stalled, "pdd-operator cannot progress without a spec change")
  return hs
end
if is(compatible, "False") then
  hs.status = "Degraded"
  hs.message = text(compatible, "The spec breaks compatibility rules")
  return hs
end
if is(degraded, "True") then
  hs.status = "Degraded"
  hs.message = text(degraded, "Degraded")
  return hs
end

local ready = condition("Ready")
if is(condition("Reconciling"), "True") or is(condition("Progressing"), "True") then
  hs.status = "Progressing"
  hs.message = text(condition("Reconciling"), text(condition("Progressing"), text(ready, "Rolling out")))
  return hs
end
if is(ready, "True") then
  local kv = condition("KVTransportReady")
  if is(kv, "False") then
    hs.status = "Degraded"
    hs.message = text(kv, "KV transport is not ready")
    return hs
  end
  hs.status = "Healthy"
  hs.message = text(ready, "Ready")
  return hs
end
if ready ~= nil and ready.reason == "ScaledToZero" then
  hs.status = "Suspended"
  hs.message = text(ready, "Scaled to zero")
  return hs
end
hs.status = "Progressing"
hs.message = text(ready, "Waiting for the PDDeployment to become Ready")
return hs
