// Where a finished export file is: `<bucket>/<object path>`. In Storage, that
// object; locally, `<export dir>/<bucket>/<object path>` (localExportPath),
// never a path of the server's. The worker's sinks write locations, the
// orchestrator reads them.
import path from 'node:path';

/** The bucket export files go to (locally: the folder under the export directory). */
export const EXPORT_BUCKET = 'exports';

/** The location of a file: `<bucket>/<object path>`. */
export function exportLocation(bucket: string, objectPath: string): string {
  const location = `${bucket}/${objectPath}`;
  if (!parseExportLocation(location)) throw new Error(`not a bucket and object path: ${JSON.stringify(location).slice(0, 100)}`);
  return location;
}

/**
 * A location's bucket and object path, or null when it is not a location
 * (an absolute path, an empty, `.` or `..` segment, a backslash or NUL).
 */
export function parseExportLocation(location: string): { bucket: string; objectPath: string } | null {
  if (typeof location !== 'string' || /[\\\0]/.test(location)) return null;
  const slash = location.indexOf('/');
  const bucket = location.slice(0, slash);
  const objectPath = location.slice(slash + 1);
  if (slash <= 0 || !/^[a-z0-9_-]+$/i.test(bucket)) return null;
  if (objectPath.split('/').some((s) => s === '' || s === '.' || s === '..')) return null;
  return { bucket, objectPath };
}

/**
 * The file a local export's location names: `<rootDir>/<bucket>/<object path>`
 * (what localDirectorySink(rootDir) wrote; read it with e.g.
 * `readFile(localExportPath(exportDir, result.location))`). Throws for a string
 * that is not a location, so nothing outside rootDir is ever named.
 */
export function localExportPath(rootDir: string, location: string): string {
  const parsed = parseExportLocation(location);
  if (!parsed) throw new Error(`not an export location: ${JSON.stringify(location).slice(0, 100)}`);
  return path.join(path.resolve(rootDir), parsed.bucket, ...parsed.objectPath.split('/'));
}
