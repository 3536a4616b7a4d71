// Builds one HubSpot-shaped JSON object per content type (field names as the CMS v3 APIs send them).
// Every item carries the fields HubSpot's published schema marks required (see schema-facts.ts),
// with the published types.

import { createRandom, pick, randomInt, type Random } from './prng.ts';
import { guid, htmlBody, personName, phrase, slugBase, slugify, title, TRICKY_VALUES } from './text.ts';

export const EPOCH_ISO = '1970-01-01T00:00:00Z';

export interface GenContext {
  random: Random;
  portalId: number;
  domain: string;
  authorIds: readonly number[];
  tagIds: readonly number[];
}

export interface GenInput {
  seq: number; // 0-based position within the type, used for deterministic variety
  id: number;
  createdMs: number;
  updatedMs: number;
}

export type Body = Record<string, unknown>;

const iso = (ms: number) => new Date(ms).toISOString();
const userId = (random: Random) => String(randomInt(random, 1_000_000, 9_999_999));

// A generator of its own per item, seeded from the item's id, for the fields added to match the
// published schemas: drawing them from the portal's stream would shift every later id and value.
const itemRandom = (id: number): Random => createRandom((id % 0x1_0000_0000) ^ 0x2545f491);

// Fields pages and blog posts share that are empty/off on most content (A/B tests, campaigns,
// dynamic pages, expiry, passwords and translations are the exceptions HubSpot reports with them).
function contentDefaults(input: GenInput, url: string, published: boolean): Body {
  const random = itemRandom(input.id);
  return {
    abTestId: input.seq % 41 === 13 ? String(randomInt(random, 10_000_000, 99_999_999)) : '',
    campaign: input.seq % 6 === 1 ? guid(random) : '',
    dynamicPageDataSourceId: '',
    dynamicPageDataSourceType: 0,
    dynamicPageHubDbTableId: '',
    enableDomainStylesheets: false,
    enableLayoutStylesheets: input.seq % 3 === 0,
    includeDefaultCustomCss: false,
    linkRelCanonicalUrl: input.seq % 10 === 7 ? url : '',
    mabExperimentId: '',
    pageExpiryDate: 0,
    pageExpiryEnabled: false,
    pageExpiryRedirectId: 0,
    pageExpiryRedirectUrl: '',
    password: '',
    publishImmediately: published,
    translatedFromId: '',
  };
}

const WHITE = { r: 255, g: 255, b: 255, a: 1 };

// Section styles as the drag-and-drop editor saves them (no background set).
function sectionStyles(): Body {
  return {
    backgroundColor: WHITE,
    backgroundGradient: { angle: { units: 'DEGREES', value: 180 }, colors: [], sideOrCorner: { horizontalSide: 'CENTER', verticalSide: 'TOP' } },
    backgroundImage: { backgroundPosition: 'MIDDLE_CENTER', backgroundSize: 'cover', imageUrl: '' },
    flexboxPositioning: 'TOP_LEFT',
    forceFullWidthSection: false,
    maxWidthSectionCentering: 1200,
    verticalAlignment: 'TOP',
  };
}

// One layout section (model: LayoutSection); the editor nests them as rows of cells.
function layoutSection(name: string, type: string, label: string, rows: Body[]): Body {
  return {
    cells: [], cssClass: '', cssId: '', cssStyle: '', label, name, params: {},
    rowMetaData: rows.map(() => ({ cssClass: 'dnd-section', styles: sectionStyles() })),
    rows, styles: sectionStyles(), type, w: 12, x: 0,
  };
}

// Drag-and-drop area of a page built in the editor: one section holding the hero module.
function dndLayout(): Body {
  const module = layoutSection('dnd_area-module-1', 'custom_widget', 'Hero', []);
  return { dnd_area: layoutSection('dnd_area', 'cell', 'Main section', [{ '0': module }]) };
}

// Site page or landing page (model: Page).
export function buildPage(ctx: GenContext, input: GenInput, kind: 'site' | 'landing'): Body {
  const { random } = ctx;
  const name = title(random, input.seq);
  const slug = slugify(name, input.id);
  const published = input.seq % 9 !== 4;
  const url = `https://${ctx.domain}/${kind === 'landing' ? 'lp/' : ''}${slug}`;
  return {
    id: String(input.id),
    name,
    htmlTitle: input.seq % 31 === 3 ? `=1+2 ${name}` : `${name} | Acme, Inc.`,
    slug,
    url,
    domain: ctx.domain,
    state: published ? 'PUBLISHED' : 'DRAFT',
    currentState: published ? 'PUBLISHED' : 'DRAFT',
    currentlyPublished: published,
    publishDate: iso(input.createdMs + 3_600_000),
    created: iso(input.createdMs),
    updated: iso(input.updatedMs),
    language: 'en',
    metaDescription: input.seq % 17 === 5 ? 'Multi-line,\n"quoted", description' : phrase(random, 12),
    authorName: personName(random),
    createdById: userId(random),
    updatedById: userId(random),
    contentTypeCategory: kind === 'landing' ? '1' : '4',
    categoryId: kind === 'landing' ? 1 : 4,
    subcategory: kind === 'landing' ? 'landing_page' : 'site_page',
    templatePath: pick(random, ['@hubspot/growth/templates/home.html', '@hubspot/growth/templates/about.html', 'custom/page.html']),
    folderId: kind === 'landing' ? String(randomInt(random, 1000, 1010)) : '',
    contentGroupId: '',
    archivedAt: EPOCH_ISO,
    archivedInDashboard: false,
    abStatus: 'master',
    featuredImage: `https://${ctx.domain}/hubfs/img-${input.id}.png`,
    featuredImageAltText: '',
    useFeaturedImage: false,
    headHtml: '',
    footerHtml: '',
    publicAccessRules: [],
    publicAccessRulesEnabled: false,
    pageRedirected: false,
    attachedStylesheets: [],
    translations: {},
    widgetContainers: {},
    themeSettingsValues: {},
    layoutSections: input.seq % 10 === 2 ? dndLayout() : {},
    widgets: {
      hero: { type: 'module', name: 'hero', body: { html: htmlBody(random, 2) } },
    },
    ...contentDefaults(input, url, published),
  };
}

// Blog post (model: BlogPost) linked to a seeded author and tags.
export function buildBlogPost(ctx: GenContext, input: GenInput): Body {
  const { random } = ctx;
  const name = title(random, input.seq);
  const slug = `blog/${slugify(name, input.id)}`;
  const published = input.seq % 11 !== 6;
  const body = htmlBody(random, randomInt(random, 2, 4));
  const tagCount = Math.min(ctx.tagIds.length, randomInt(random, 0, 3));
  const tagIds: number[] = [];
  for (let i = 0; i < tagCount; i++) tagIds.push(pick(random, ctx.tagIds));
  const url = `https://${ctx.domain}/${slug}`;
  const publishDate = iso(input.createdMs + 7_200_000);
  return {
    id: String(input.id),
    name,
    htmlTitle: name,
    slug,
    url,
    domain: ctx.domain,
    state: published ? 'PUBLISHED' : 'DRAFT',
    currentState: published ? 'PUBLISHED' : 'DRAFT',
    currentlyPublished: published,
    publishDate,
    publishedAt: published ? publishDate : EPOCH_ISO,
    created: iso(input.createdMs),
    updated: iso(input.updatedMs),
    language: 'en',
    contentGroupId: '4711',
    blogAuthorId: ctx.authorIds.length ? String(pick(random, ctx.authorIds)) : '',
    authorName: personName(random),
    tagIds: [...new Set(tagIds)],
    metaDescription: phrase(random, 14),
    postSummary: body.slice(0, 120),
    postBody: body,
    rssBody: '',
    rssSummary: '',
    featuredImage: `https://${ctx.domain}/hubfs/post-${input.id}.jpg`,
    featuredImageAltText: phrase(random, 3),
    useFeaturedImage: true,
    createdById: userId(random),
    updatedById: userId(random),
    contentTypeCategory: '3',
    categoryId: 3,
    archivedAt: 0,
    archivedInDashboard: false,
    abStatus: 'master',
    headHtml: '',
    footerHtml: '',
    publicAccessRules: [],
    publicAccessRulesEnabled: false,
    enableGoogleAmpOutputOverride: false,
    folderId: '',
    attachedStylesheets: [],
    layoutSections: {},
    themeSettingsValues: {},
    translations: {},
    widgetContainers: {},
    widgets: {},
    ...contentDefaults(input, url, published),
  };
}

// Blog author (model: BlogAuthor).
export function buildBlogAuthor(ctx: GenContext, input: GenInput): Body {
  const { random } = ctx;
  const fullName = input.seq % 13 === 2 ? `${personName(random)}, PhD` : personName(random);
  const slug = slugify(fullName, input.id);
  return {
    id: String(input.id),
    name: fullName,
    fullName,
    displayName: fullName,
    email: `${slug}@example.com`,
    slug,
    bio: input.seq % 7 === 1 ? 'Writes about "growth",\nmarketing & ops.' : phrase(random, 10),
    website: `https://${ctx.domain}/team/${slug}`,
    twitter: '',
    linkedin: '',
    facebook: '',
    avatar: '',
    language: 'en',
    translatedFromId: 0,
    created: iso(input.createdMs),
    updated: iso(input.updatedMs),
    deletedAt: EPOCH_ISO,
  };
}

// Blog tag (model: Tag).
export function buildBlogTag(ctx: GenContext, input: GenInput): Body {
  const name = input.seq % 19 === 4 ? TRICKY_VALUES[input.seq % TRICKY_VALUES.length] : phrase(ctx.random, randomInt(ctx.random, 1, 2));
  return {
    id: String(input.id),
    name: `${name} ${input.seq}`,
    slug: `${slugBase(name ?? '') || 'tag'}-${input.seq}`,
    language: 'en',
    translatedFromId: 0,
    created: iso(input.createdMs),
    updated: iso(input.updatedMs),
    deletedAt: EPOCH_ISO,
  };
}

// URL redirect (model: UrlMapping).
export function buildUrlRedirect(ctx: GenContext, input: GenInput): Body {
  const { random } = ctx;
  const from = slugify(phrase(random, 2), input.id);
  return {
    id: String(input.id),
    routePrefix: `/old/${from}`,
    destination: input.seq % 29 === 9 ? `https://${ctx.domain}/new?a=1,2&b="x"` : `https://${ctx.domain}/${from}`,
    redirectStyle: input.seq % 5 === 0 ? 302 : 301,
    precedence: input.seq,
    isOnlyAfterNotFound: false,
    isMatchFullUrl: false,
    isMatchQueryString: false,
    isPattern: input.seq % 10 === 3,
    isTrailingSlashOptional: true,
    isProtocolAgnostic: true,
    created: iso(input.createdMs),
    updated: iso(input.updatedMs),
  };
}

export const HUBDB_COLUMNS = [
  { id: '1', name: 'name', label: 'Name', description: '', type: 'TEXT' },
  { id: '2', name: 'description', label: 'Description', description: 'Shown on the detail page', type: 'RICHTEXT' },
  { id: '3', name: 'price', label: 'Price', description: 'USD, before tax', type: 'NUMBER' },
  { id: '4', name: 'active', label: 'Active', description: '', type: 'BOOLEAN' },
  { id: '5', name: 'launch_date', label: 'Launch date', description: '', type: 'DATE' },
  { id: '6', name: 'category', label: 'Category', description: '', type: 'SELECT' },
  { id: '7', name: 'website', label: 'Website', description: '', type: 'URL' },
] as const;

// Options of the SELECT column as a row's value carries them.
const CATEGORY_OPTIONS = ['Alpha', 'Beta, "Gamma"', 'Δelta'].map((name, order) => ({ id: String(order + 1), name, type: 'option', order }));

// HubDB table without rowCount (the store fills in rowCount/columnCount per response).
export function buildHubDbTable(ctx: GenContext, input: GenInput): Body {
  const label = input.seq === 0 ? 'Products, "featured"' : phrase(ctx.random, 2);
  const user = { id: userId(ctx.random), email: 'owner@example.com', firstName: 'Zoë', lastName: "O'Neil" };
  return {
    id: String(input.id),
    name: `table_${input.id}`,
    label,
    columns: HUBDB_COLUMNS.map((c) => ({ ...c, ...(c.type === 'SELECT' ? { options: columnOptions(input.createdMs) } : {}), deleted: false })),
    published: true,
    publishedAt: iso(input.updatedMs),
    createdAt: iso(input.createdMs),
    updatedAt: iso(input.updatedMs),
    createdBy: user,
    updatedBy: user,
    allowPublicApiAccess: false,
    useForPages: input.seq % 2 === 0,
    allowChildTables: false,
    enableChildTablePages: false,
    isOrderedManually: false,
    deleted: false,
    deletedAt: EPOCH_ISO,
    dynamicMetaTags: {},
  };
}

// Options of the SELECT column as the table lists them (model: Option).
function columnOptions(createdMs: number): Body[] {
  const at = iso(createdMs);
  return CATEGORY_OPTIONS.map((o) => ({ ...o, label: o.name, createdAt: at, updatedAt: at }));
}

// HubDB row (model: HubDbTableRowV3).
export function buildHubDbRow(ctx: GenContext, input: GenInput): Body {
  const { random } = ctx;
  const name = title(random, input.seq);
  return {
    id: String(input.id),
    path: slugify(name, input.id),
    name,
    childTableId: '0',
    createdAt: iso(input.createdMs),
    updatedAt: iso(input.updatedMs),
    publishedAt: iso(input.updatedMs),
    values: {
      name,
      description: htmlBody(random, 1),
      price: Math.round(random() * 100_000) / 100,
      active: random() > 0.3,
      launch_date: input.createdMs - (input.createdMs % 86_400_000),
      category: pick(random, CATEGORY_OPTIONS),
      website: `https://${ctx.domain}/p/${input.id}`,
    },
  };
}
