// The sign-in form posts JSON to the API and goes home on success (a static file: the page's CSP allows no
// inline script).
document.getElementById('login').addEventListener('submit', async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  const r = await fetch('/api/auth/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({username: f.get('username'), password: f.get('password')})});
  if (r.ok) { window.location = '/'; } else { document.getElementById('error').textContent = (await r.json()).error; }
});
