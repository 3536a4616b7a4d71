// npm run db:start — start the local Postgres, apply migrations, print the URL, keep running.
// npm run db:reset — recreate the `queue` database from the migrations.
import { startDevDatabase } from './lib/dev-database.ts';

const command = process.argv[2];
if (command !== 'start' && command !== 'reset') {
  console.error('usage: tsx scripts/db.ts start|reset');
  process.exit(2);
}
const db = await startDevDatabase({ fresh: command === 'reset' });
if (command === 'reset') {
  console.log(`Recreated and migrated: ${db.url}`);
  await db.stop();
} else {
  console.log(`Postgres is running with migrations applied.\nDATABASE_URL=${db.url}\nCtrl-C stops it.`);
  const shutdown = () => void db.stop().then(() => process.exit(0));
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}
