// Share links: the policy text and the trace settings in the URL fragment (never sent to a
// server). `#v=1&z=<base64url of deflate-raw(JSON)>`, or `&t=` with the JSON uncompressed
// where the browser has no CompressionStream.

function toBase64Url(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

async function pipe(bytes, stream) {
  const out = new Response(new Blob([bytes]).stream().pipeThrough(stream));
  return new Uint8Array(await out.arrayBuffer());
}

/** The fragment (with its '#') for ``state`` ({policy, preset, steps, seed, hardware}). */
export async function encodeShare(state) {
  const json = new TextEncoder().encode(JSON.stringify(state));
  if (typeof CompressionStream === "function") {
    return `#v=1&z=${toBase64Url(await pipe(json, new CompressionStream("deflate-raw")))}`;
  }
  return `#v=1&t=${toBase64Url(json)}`;
}

/** The state a fragment encodes, or null when it is no share link; throws on a damaged one,
 * with a message that completes "This share link could not be read: …". */
export async function decodeShare(hash) {
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  if (!params.has("v") && !params.has("z") && !params.has("t")) {
    return null;
  }
  if (params.has("v") && params.get("v") !== "1") {
    throw new Error(`it is of version ${params.get("v")}, which this page does not know`);
  }
  let bytes;
  try {
    if (params.has("z")) {
      bytes = await pipe(fromBase64Url(params.get("z")), new DecompressionStream("deflate-raw"));
    } else if (params.has("t")) {
      bytes = fromBase64Url(params.get("t"));
    } else {
      throw new Error("no data");
    }
  } catch {
    throw new Error("its data is damaged (cut short or changed when it was copied?)");
  }
  let state;
  try {
    state = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new Error("its data is damaged (not the settings a share link holds)");
  }
  if (typeof state !== "object" || state === null || typeof state.policy !== "string") {
    throw new Error("it holds no policy");
  }
  return state;
}
