// Signing in: email and password through supabase-js's auth client, sign-in or
// sign-up, against the project (deployed: its URL and anon key typed in) or
// against `npm start -- --serve`'s local Auth (URL and key from config.json).
// The session is kept in this window's sessionStorage: a reload stays signed
// in, and two windows can be two users. "Sign out" ends the session.

const $ = (id) => document.getElementById(id);
const STORAGE_KEY = 'queue.auth';

/**
 * Resolves once a user is signed in: { supabase, cfg (with accessToken), onToken(fn) },
 * onToken calling fn with every refreshed access token. `cfg` is config.json's (local) or null.
 */
export async function signIn(cfg, supabaseJsUrl) {
  const { createClient } = await import(supabaseJsUrl);
  const client = (url, key) =>
    createClient(url, key, { auth: { storage: sessionStorage, storageKey: STORAGE_KEY, persistSession: true, autoRefreshToken: true, detectSessionInUrl: false } });
  const local = cfg?.mode === 'local';
  const project = () =>
    local
      ? { ...cfg }
      : { mode: 'deployed', poll: cfg?.poll ?? true, supabaseUrl: $('cfg-url').value.trim().replace(/\/+$/, ''), anonKey: $('cfg-key').value.trim() };

  // Signed in already in this window?
  const savedUrl = local ? cfg.supabaseUrl : localStorage.getItem('queue.supabaseUrl');
  const savedKey = local ? cfg.anonKey : localStorage.getItem('queue.anonKey');
  if (savedUrl && savedKey && sessionStorage.getItem(STORAGE_KEY)) {
    const supabase = client(savedUrl, savedKey);
    const { data } = await supabase.auth.getSession();
    if (data.session) return signedIn(supabase, data.session, local ? { ...cfg } : { mode: 'deployed', poll: cfg?.poll ?? true, supabaseUrl: savedUrl, anonKey: savedKey });
  }

  $('signin').hidden = false;
  $('cfg-url').hidden = local;
  $('cfg-key').hidden = local;
  $('signin-local').hidden = !local;
  $('connection').textContent = local ? `Sign in to the local project at ${cfg.supabaseUrl}.` : 'Sign in to your Supabase project.';
  if (!local) {
    $('cfg-url').value = localStorage.getItem('queue.supabaseUrl') ?? '';
    $('cfg-key').value = localStorage.getItem('queue.anonKey') ?? '';
  }
  return new Promise((resolve) => {
    const attempt = (how) => async () => {
      const target = project();
      const credentials = { email: $('signin-email').value.trim(), password: $('signin-password').value };
      try {
        const supabase = client(target.supabaseUrl, target.anonKey);
        const { data, error } = how === 'up' ? await supabase.auth.signUp(credentials) : await supabase.auth.signInWithPassword(credentials);
        if (error) throw error;
        if (!data.session) {
          // A project with email confirmations on: the user confirms, then signs in.
          $('signin-message').textContent = `Signed up: confirm ${credentials.email} from the email the project sent, then sign in.`;
          return;
        }
        if (!local) {
          localStorage.setItem('queue.supabaseUrl', target.supabaseUrl);
          localStorage.setItem('queue.anonKey', target.anonKey);
        }
        resolve(signedIn(supabase, data.session, target));
      } catch (e) {
        $('signin-message').textContent = `${how === 'up' ? 'Sign-up' : 'Sign-in'} failed: ${e.message ?? e}${e.code ? ` (${e.code})` : ''}`;
      }
    };
    $('signin-btn').onclick = attempt('in');
    $('signup-btn').onclick = attempt('up');
  });
}

function signedIn(supabase, session, cfg) {
  $('signin').hidden = true;
  const out = $('signout-btn');
  out.hidden = false;
  out.textContent = `Sign out ${session.user.email ?? ''}`.trim();
  out.onclick = async () => {
    await supabase.auth.signOut().catch(() => {});
    location.reload();
  };
  return {
    supabase,
    cfg: { ...cfg, accessToken: session.access_token },
    onToken: (fn) => supabase.auth.onAuthStateChange((_event, s) => s && fn(s.access_token)),
  };
}
