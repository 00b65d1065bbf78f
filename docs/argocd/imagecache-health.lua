-- Argo CD health of a kube-fledged ImageCache (kubefledged.io/v1alpha2),
-- for resource.customizations.health.kubefledged.io_ImageCache in argocd-cm
-- (docs/argocd.md). Argo CD runs custom checks with its base, table and os
-- libraries only: no string.* here.
local hs = {}
local st = obj.status

if st == nil or st.status == nil or st.status == "" then
  hs.status = "Progressing"
  hs.message = "Waiting for the kube-fledged controller to start the first operation"
  return hs
end

-- The controller acts on a spec edit after the running operation: until
-- then the status describes the spec before it. The original kube-fledged
-- recorded no observedGeneration; its caches are judged by their status.
local gen = obj.metadata.generation
local observed = st.observedGeneration
if gen ~= nil and observed ~= nil and observed > 0 and observed < gen then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to act on generation " .. gen .. " of the spec (status is of " .. observed .. ")"
  return hs
end

local progress = ""
if st.progress ~= nil and st.progress ~= "" then
  progress = " (" .. st.progress .. ")"
end

-- Ready keeps the outcome of the last finished operation while another runs.
-- It is True only when every node the lists select holds every image: False
-- with reason Failed when a pull failed, NodesSkipped when a node the pulls
-- left out (cordoned, NotReady, not Linux, unsupported architecture) lacks an image.
local ready = nil
if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    if c.type == "Ready" then
      ready = c
    end
  end
end
local lastFailed = ready ~= nil and ready.status == "False" and ready.reason == "Failed"
local nodesSkipped = ready ~= nil and ready.status == "False" and ready.reason == "NodesSkipped"

if st.status == "Processing" then
  hs.status = "Progressing"
  hs.message = (st.reason or "An operation") .. " is running" .. progress
  if lastFailed then
    hs.message = hs.message .. "; the previous operation Failed"
  elseif nodesSkipped then
    hs.message = hs.message .. "; the previous operation left nodes without the images"
  end
elseif st.status == "Succeeded" and nodesSkipped then
  -- The pulls that could run succeeded, but selected nodes were left out
  -- and lack images: not Healthy.
  hs.status = "Degraded"
  hs.message = ready.message or "Nodes the cache selects were left out and lack its images"
elseif st.status == "Succeeded" then
  hs.status = "Healthy"
  hs.message = st.message or "Succeeded"
elseif st.status == "NoImagesPulledOrDeleted" then
  -- Nothing to do is not a fault: no node matches the lists' selectors yet,
  -- and a matching node that joins gets the images.
  hs.status = "Healthy"
  hs.message = st.message or "No node matches the cache's node selectors"
elseif st.status == "Failed" and nodesSkipped and st.failures == nil then
  -- Every node that matched was left out: no pull could run.
  hs.status = "Degraded"
  hs.message = ready.message or "Every node the cache selects was left out"
elseif st.status == "Failed" then
  hs.status = "Degraded"
  hs.message = st.message or "Failed"
  if st.counts ~= nil and st.counts.failed ~= nil and st.counts.desired ~= nil then
    hs.message = hs.message .. ": " .. st.counts.failed .. " of " .. st.counts.desired .. " (image, node) pairs failed"
  end
  if st.failures ~= nil then
    local images = {}
    for image, _ in pairs(st.failures) do
      table.insert(images, image)
    end
    table.sort(images)
    local first = st.failures[images[1]]
    if first ~= nil and first[1] ~= nil then
      hs.message = hs.message .. "; " .. images[1] .. " on " .. first[1].node .. ": " .. first[1].reason
      if #images > 1 then
        hs.message = hs.message .. " (and " .. (#images - 1) .. " more images)"
      end
    end
  end
elseif st.status == "Aborted" then
  -- A restart of the controller cut the operation short; the next
  -- controller runs it again first thing, so this passes by itself.
  hs.status = "Progressing"
  hs.message = "Aborted by a controller restart; it runs again" .. progress
else
  hs.status = "Unknown"
  hs.message = "Unknown ImageCache status " .. st.status
end
return hs
