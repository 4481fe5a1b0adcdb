/**
 * Strict JSON that Baton can store. `JSON.stringify` is lenient where the API is not: it turns
 * NaN and Infinity into `null`, drops functions and `undefined`, and throws only on cycles and
 * BigInt. A handler's result is checked here first, so a bad value fails its job at once with a
 * message naming where the problem is (`$.ratio is NaN, which is not JSON`) instead of being
 * silently changed or retried forever.
 */

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Why `value` cannot be sent as strict JSON and stored by Baton, or undefined when it can. */
export function jsonProblem(value: unknown): string | undefined {
  return find(value, "$", new Set());
}

/** `value` as strict JSON text; throws a TypeError naming the problem when it is not JSON. */
export function strictJson(value: unknown): string {
  const problem = jsonProblem(value);
  if (problem !== undefined) throw new TypeError(problem);
  return JSON.stringify(value);
}

/** Why a handler's result cannot complete its job, or undefined when it can. */
export function resultProblem(result: unknown, jobType: string): string | undefined {
  if (result === undefined || result === null) return undefined;
  if (typeof result !== "object" || Array.isArray(result)) {
    const kind = Array.isArray(result) ? "an array" : `a ${typeof result}`;
    return `the handler of ${jobType} returned ${kind}; return an object of variables, or nothing`;
  }
  const problem = jsonProblem(result);
  return problem === undefined ? undefined : `the handler's result cannot be sent: ${problem}`;
}

function find(value: unknown, path: string, ancestors: Set<object>): string | undefined {
  switch (typeof value) {
    case "boolean":
      return undefined;
    case "string":
      return textProblem(value, path);
    case "number":
      if (Number.isNaN(value)) return `${path} is NaN, which is not JSON`;
      if (!Number.isFinite(value)) {
        return `${path} is ${value < 0 ? "-" : ""}Infinity, which is not JSON`;
      }
      return undefined;
    case "bigint":
      return `${path} is a BigInt, which is not JSON (convert it to a string or a number)`;
    case "undefined":
      return `${path} is undefined, which is not JSON`;
    case "function":
      return `${path} is a function, which is not JSON`;
    case "symbol":
      return `${path} is a symbol, which is not JSON`;
  }
  if (value === null) return undefined;
  const obj = value as object;
  if (ancestors.has(obj))
    return `${path} contains itself (a circular reference), which is not JSON`;
  const toJSON = (obj as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    // A Date (or anything with toJSON) is sent as what toJSON gives, as JSON.stringify does.
    return find((toJSON as () => unknown).call(obj), path, ancestors);
  }
  ancestors.add(obj);
  try {
    if (Array.isArray(obj)) {
      for (let i = 0; i < obj.length; i++) {
        const problem = find(obj[i], `${path}[${i}]`, ancestors);
        if (problem) return problem;
      }
      return undefined;
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const name = (proto?.constructor as { name?: string } | undefined)?.name || "object";
      return `${path} is ${/^[aeiouAEIOU]/.test(name) ? "an" : "a"} ${name}, which is not JSON (use a plain object)`;
    }
    for (const [key, item] of Object.entries(obj)) {
      const keyProblem = textProblem(key, `a key of ${path}`);
      if (keyProblem) return keyProblem;
      if (item === undefined) continue; // dropped, as JSON.stringify does
      const problem = find(item, member(path, key), ancestors);
      if (problem) return problem;
    }
    return undefined;
  } finally {
    ancestors.delete(obj);
  }
}

function textProblem(text: string, where: string): string | undefined {
  if (text.includes("\u0000")) {
    return `${where} contains a NUL character (\\u0000), which Baton cannot store`;
  }
  if (!text.isWellFormed()) return `${where} contains a lone surrogate, which is not UTF-8`;
  return undefined;
}

function member(path: string, key: string): string {
  return IDENTIFIER.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}
