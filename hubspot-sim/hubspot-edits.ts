// Edits made "in HubSpot" by a person (a test hook, or one queued to land right
// after a read returns the item): checked as an API write is, applied as one
// write by that person (new update time, revision, audit event), never counted
// as the API's. A HubDB row is edited in the draft and its table published.

import type { ContentType } from '../shared/hubspot/content-types.ts';
import type { SimUser } from './audit-log.ts';
import type { SimItem } from './collection.ts';
import { checkRowChange, publishTable, updateDraftRow } from './hubdb-drafts.ts';
import { updatedField } from './portal.ts';
import { checkFields } from './write-validation.ts';
import type { Fields, PortalWrites } from './write-state.ts';

/** Applies the edit; returns the item's new update time (ISO). Throws on fields the API would refuse. */
export function editInHubSpot(state: PortalWrites, type: ContentType, item: SimItem, fields: Fields, user: SimUser): string {
  if (type === 'hubdb_tables') throw new Error('edit a HubDB table with renameTable; its rows with type hubdb_rows');
  if (type === 'hubdb_rows') {
    const table = state.portal.collection('hubdb_tables').byId(item.tableId ?? -1);
    if (!table) throw new Error(`row ${item.id} has no table`);
    const checked = checkRowChange(table, fields);
    if (!checked.ok) throw new Error(`edit refused: ${checked.problem.message}`);
    updateDraftRow(state, table, item, checked.change, user, null);
    publishTable(state, table, user, null);
    return String(item.body['updatedAt']);
  }
  const checked = checkFields(type, fields);
  if (!checked.ok) throw new Error(`edit refused: ${checked.problem.message}`);
  state.applyLive(type, item, checked.fields, user, 'UPDATED', null);
  return String(item.body[updatedField(type)]);
}
