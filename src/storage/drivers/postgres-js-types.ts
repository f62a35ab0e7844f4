/**
 * postgres.js's array types, declared instead of fetched.
 *
 * By default postgres.js spends a round trip on every new connection asking
 * pg_type for the array types, before the connection's first statement. A
 * Worker opens a new connection for every request, so that is a round trip
 * per step; it is also the one statement postgres.js runs with a promise
 * nobody handles (a connection dropped during it ends a Node process). The
 * built-in element → array type ids are fixed in Postgres (pg_type.dat), so
 * they are declared here, parsed and serialized exactly as postgres.js does
 * for the fetched ones (ported from postgres.js 3.4 src/types.js, which does
 * not export them). The engine itself uses no array type; these keep raw SQL
 * in activities (`ctx.tx`) returning arrays as before. Arrays of types created
 * in the database (enums, domains) come back as Postgres array text, which
 * drizzle's array columns parse themselves.
 */

type Parser = ((x: string) => unknown) & { array?: boolean };
type Serializer = (x: unknown) => unknown;

export interface PostgresJsTypeOptions {
  parsers: Record<number, Parser | undefined>;
  serializers: Record<number, Serializer | undefined>;
  shared: { typeArrayMap: Record<number, number> };
  transform: { undefined?: unknown };
}

/**
 * [element type id, array type id] of the built-in types: Postgres assigns
 * ids below 10000 by hand and never changes them (pg_type.dat). Catalog row
 * types are left out (their array ids are assigned at initdb).
 */
export const BUILTIN_ARRAY_TYPES: readonly (readonly [number, number])[] = [
  [16, 1000], // bool
  [17, 1001], // bytea
  [18, 1002], // char
  [19, 1003], // name
  [20, 1016], // int8
  [21, 1005], // int2
  [22, 1006], // int2vector
  [23, 1007], // int4
  [24, 1008], // regproc
  [25, 1009], // text
  [26, 1028], // oid
  [27, 1010], // tid
  [28, 1011], // xid
  [29, 1012], // cid
  [30, 1013], // oidvector
  [114, 199], // json
  [142, 143], // xml
  [600, 1017], // point
  [601, 1018], // lseg
  [602, 1019], // path
  [603, 1020], // box
  [604, 1027], // polygon
  [628, 629], // line
  [650, 651], // cidr
  [700, 1021], // float4
  [701, 1022], // float8
  [718, 719], // circle
  [774, 775], // macaddr8
  [790, 791], // money
  [829, 1040], // macaddr
  [869, 1041], // inet
  [1033, 1034], // aclitem
  [1042, 1014], // bpchar
  [1043, 1015], // varchar
  [1082, 1182], // date
  [1083, 1183], // time
  [1114, 1115], // timestamp
  [1184, 1185], // timestamptz
  [1186, 1187], // interval
  [1266, 1270], // timetz
  [1560, 1561], // bit
  [1562, 1563], // varbit
  [1700, 1231], // numeric
  [1790, 2201], // refcursor
  [2202, 2207], // regprocedure
  [2203, 2208], // regoper
  [2204, 2209], // regoperator
  [2205, 2210], // regclass
  [2206, 2211], // regtype
  [2275, 1263], // cstring
  [2950, 2951], // uuid
  [2970, 2949], // txid_snapshot
  [3220, 3221], // pg_lsn
  [3614, 3643], // tsvector
  [3615, 3645], // tsquery
  [3642, 3644], // gtsvector
  [3734, 3735], // regconfig
  [3769, 3770], // regdictionary
  [3802, 3807], // jsonb
  [3904, 3905], // int4range
  [3906, 3907], // numrange
  [3908, 3909], // tsrange
  [3910, 3911], // tstzrange
  [3912, 3913], // daterange
  [3926, 3927], // int8range
  [4072, 4073], // jsonpath
  [4089, 4090], // regnamespace
  [4096, 4097], // regrole
  [4191, 4192], // regcollation
  [4451, 6150], // int4multirange
  [4532, 6151], // nummultirange
  [4533, 6152], // tsmultirange
  [4534, 6153], // tstzmultirange
  [4535, 6155], // datemultirange
  [4536, 6157], // int8multirange
  [5038, 5039], // pg_snapshot
  [5069, 271], // xid8
];

/** What postgres.js's fetchArrayTypes does with each row it reads (connection.js addArrayType). */
export function declareArrayTypes(options: PostgresJsTypeOptions): void {
  for (const [oid, typarray] of BUILTIN_ARRAY_TYPES) {
    // Types the caller configured itself (drizzle makes the date and numeric arrays pass through as text).
    if (options.parsers[typarray] && options.serializers[typarray]) continue;
    const parser = options.parsers[oid];
    options.shared.typeArrayMap[oid] = typarray;
    const parse: Parser = (xs) => arrayParser(xs, parser, typarray);
    parse.array = true;
    options.parsers[typarray] = parse;
    options.serializers[typarray] = (xs) => arraySerializer(xs, options.serializers[oid], options, typarray);
  }
}

// Only box (1020) separates its elements with ';'.
const delimiterOf = (typarray: number) => (typarray === 1020 ? ";" : ",");

const arrayEscape = (x: string) => x.replace(/\\/g, "\\\\").replace(/"/g, '\\"');

function arraySerializer(xs: unknown, serializer: Serializer | undefined, options: PostgresJsTypeOptions, typarray: number): unknown {
  if (!Array.isArray(xs)) return xs;
  if (!xs.length) return "{}";
  const delimiter = delimiterOf(typarray);
  const first: unknown = xs[0];
  if (Array.isArray(first) && !(first as { type?: unknown }).type) {
    return "{" + xs.map((x) => arraySerializer(x, serializer, options, typarray)).join(delimiter) + "}";
  }
  return (
    "{" +
    xs
      .map((x: unknown) => {
        if (x === undefined) {
          x = options.transform.undefined;
          if (x === undefined) throw Object.assign(new Error("Undefined values are not allowed"), { code: "UNDEFINED_VALUE" });
        }
        if (x === null) return "null";
        const typed = x as { type?: unknown; value?: unknown };
        // postgres.js's own coercion, kept as is.
        return '"' + arrayEscape(String(serializer ? serializer(typed.type ? typed.value : x) : "" + (x as string))) + '"';
      })
      .join(delimiter) +
    "}"
  );
}

interface ParserState {
  i: number;
  char: string | null;
  str: string;
  quoted: boolean;
  last: number;
  p?: string | null;
}

/** `x` is the array text after its opening brace (postgres.js hands array parsers the text from the second character). */
function arrayParser(x: string, parser: Parser | undefined, typarray: number): unknown[] {
  return arrayParserLoop({ i: 0, char: null, str: "", quoted: false, last: 0 }, x, parser, typarray);
}

function arrayParserLoop(s: ParserState, x: string, parser: Parser | undefined, typarray: number): unknown[] {
  const xs: unknown[] = [];
  const delimiter = delimiterOf(typarray);
  const take = (v: string) => (parser ? parser(v) : v);
  for (; s.i < x.length; s.i++) {
    s.char = x[s.i]!;
    if (s.quoted) {
      if (s.char === "\\") {
        s.str += x[++s.i];
      } else if (s.char === '"') {
        xs.push(take(s.str));
        s.str = "";
        s.quoted = x[s.i + 1] === '"';
        s.last = s.i + 2;
      } else {
        s.str += s.char;
      }
    } else if (s.char === '"') {
      s.quoted = true;
    } else if (s.char === "{") {
      s.last = ++s.i;
      xs.push(arrayParserLoop(s, x, parser, typarray));
    } else if (s.char === "}") {
      s.quoted = false;
      if (s.last < s.i) xs.push(take(x.slice(s.last, s.i)));
      s.last = s.i + 1;
      break;
    } else if (s.char === delimiter && s.p !== "}" && s.p !== '"') {
      xs.push(take(x.slice(s.last, s.i)));
      s.last = s.i + 1;
    }
    s.p = s.char;
  }
  if (s.last < s.i) xs.push(take(x.slice(s.last, s.i + 1)));
  return xs;
}
